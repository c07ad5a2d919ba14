import Foundation
@testable import Gateway
@testable import GatewayProcess
@testable import GatewayConfig
import GatewayTools
import JSONLog
import TestSupport
import Testing

/// The `issuer:` section: every rule is its own clear FILE:LINE:COLUMN error, with real key files made by the
/// `openssl` CLI.
@Suite struct IssuerConfigTests {
    /// A folder with an RSA-2048 and an RSA-1024 signing key, a P-256 and a P-384 `.p8`, and a certificate.
    final class KeyFiles {
        let dir: URL
        init() throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-config-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path("sign.pem")])
            try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", path("weak.pem")])
            try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("AuthKey.p8")])
            try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", path("p384.p8")])
            try openssl(["req", "-x509", "-new", "-key", path("AuthKey.p8"), "-out", path("root.pem"), "-days", "30",
                         "-subj", "/CN=Test App Attestation Root"])
            try "not a key\n".write(toFile: path("junk.pem"), atomically: true, encoding: .utf8)
        }
        deinit { try? FileManager.default.removeItem(at: dir) }
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
        private func openssl(_ arguments: [String]) throws {
            let r = try Run.command("openssl", arguments)
            guard r.status == 0 else { throw HarnessError("openssl \(arguments.first ?? "") failed: \(r.stderr)") }
        }
    }

    static let head = """
    app_check:
      project_number: "123456789012"
      project_id: demo
    upstreams:
      api:
        url: http://127.0.0.1:3000
    routes:
      - name: all
        prefix: /
        upstream: api
    """

    /// The documented example's issuer section (docs/issuer.md) with the files swapped for real ones; `apps` lines follow.
    func issuer(_ keys: KeyFiles, signingKey: String = "sign.pem", extra: String = "", apps: String) -> String {
        Self.head + """

        issuer:
          base_path: /appcheck
          issuer_url: https://api.example.com/appcheck
          signing_keys:
            - \(keys.path(signingKey))
          session_ttl: 1h
          limited_use_ttl: 5m
          challenge_ttl: 5m
          state: { store: memory }
          max_exchanges_per_second: 200
        \(extra)  apps:

        """ + apps
    }

    static let fullApp = """
        - app_id: "1:123456789012:ios:0a1b2c3d4e5f6a7b"
          team_id: ABCDE12345
          bundle_id: com.example.app
          app_attest:
            environments: [production, development]
          debug_secrets: ["0123456789abcdef0123456"]
          session_ttl: 2h
    """

    func load(_ yaml: String) -> Result<Settings, ConfigErrors> { ConfigFixture.load(yaml) }

    func errors(_ yaml: String, sourceLocation: SourceLocation = #_sourceLocation) -> [ConfigError] {
        switch load(yaml) {
        case .success:
            Issue.record("expected errors, the config loaded", sourceLocation: sourceLocation)
            return []
        case let .failure(errors): return errors.errors
        }
    }

    func single(_ yaml: String, line: Int, _ fragment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let found = errors(yaml, sourceLocation: sourceLocation)
        #expect(found.count == 1, "\(found)", sourceLocation: sourceLocation)
        guard let error = found.first else { return }
        #expect(error.line == line, "\(error)", sourceLocation: sourceLocation)
        #expect(error.message.contains(fragment), "\(error)", sourceLocation: sourceLocation)
    }

    @Test func theSpecShapeLoadsWithItsValues() throws {
        let keys = try KeyFiles()
        let yaml = issuer(keys, apps: Self.fullApp + """

            - app_id: "1:123456789012:ios:ffff"
              team_id: ABCDE12345
              bundle_id: com.example.other
              device_check:
                key_id: ABC123DEFG
                private_key: \(keys.path("AuthKey.p8"))
                environment: development
          custom_token_issuers:
            - iss: backend@example.com
              jwks_url: file:///etc/backend-jwks.json
        """)
        let settings = try load(yaml).get()
        let issuer = try #require(settings.issuer)
        #expect(issuer.basePath == "/appcheck")
        #expect(issuer.tokenIssuer(projectNumber: "123456789012") == "https://api.example.com/appcheck/123456789012")
        #expect(issuer.signingKeyPaths == [keys.path("sign.pem")])
        #expect(issuer.sessionTTL == 3600 && issuer.limitedUseTTL == 300 && issuer.challengeTTL == 300)
        #expect(issuer.apps.count == 2)
        let first = issuer.apps[0]
        #expect(first.rpId == "ABCDE12345.com.example.app")
        #expect(first.appAttest?.environments == [.production, .development])
        #expect(first.sessionTTL == 7200)
        #expect(first.methods == ["generateAppAttestChallenge", "exchangeAppAttestAttestation",
                                  "exchangeAppAttestAssertion", "exchangeDebugToken"])
        let second = issuer.apps[1]
        #expect(second.deviceCheck?.effectiveAPIURL == "https://api.development.devicecheck.apple.com")
        #expect(second.methods == ["exchangeDeviceCheckToken"])
        #expect(issuer.customTokenIssuers.map(\.iss) == ["backend@example.com"])

        let printed = describeRoutes(settings)
        #expect(printed.contains("issuer (answered before routes):"))
        #expect(printed.contains("/appcheck/v1/jwks"))
        #expect(printed.contains("1:123456789012:ios:0a1b2c3d4e5f6a7b"))
        #expect(printed.contains("exchangeAppAttestAttestation (production+development)"))
        #expect(printed.contains("exchangeDeviceCheckToken"))
        #expect(!printed.contains("0123456789abcdef0123"), "a debug secret must never be printed")
    }

    @Test func serveStartsTheIssuerWithEveryMethod() throws {
        let keys = try KeyFiles()
        let settings = try load(issuer(keys, apps: Self.fullApp + """

            - app_id: "1:123456789012:ios:ffff"
              team_id: ABCDE12345
              bundle_id: com.example.other
              device_check:
                key_id: ABC123DEFG
                private_key: \(keys.path("AuthKey.p8"))
                environment: development
        """)).get()
        #expect(settings.issuer?.apps.last?.deviceCheck?.effectiveAPIURL == "https://api.development.devicecheck.apple.com")
        let server = GatewayServer(settings: settings, logSink: LogSink(fd: 2, level: .error))
        try server.start()
        #expect(server.issuer != nil)
        server.shutdown(grace: 0.1)
        #expect(!describeRoutes(settings).contains("note:"))
    }

    @Test func noIssuerSectionMeansNoIssuer() throws {
        #expect(try load(Self.head).get().issuer == nil)
    }

    @Test func aWeakSigningKeyIsRefused() throws {
        let keys = try KeyFiles()
        single(issuer(keys, signingKey: "weak.pem", apps: Self.fullApp), line: 15, "RSA-1024 key; the issuer signs with RSA 2048–4096")
    }

    @Test func aSigningKeyThatIsNotRSAIsRefused() throws {
        let keys = try KeyFiles()
        single(issuer(keys, signingKey: "AuthKey.p8", apps: Self.fullApp), line: 15, "is not an RSA private key")
        single(issuer(keys, signingKey: "junk.pem", apps: Self.fullApp), line: 15, "is not an RSA private key")
        single(issuer(keys, signingKey: "missing.pem", apps: Self.fullApp), line: 15, "does not exist")
    }

    @Test func ttlsOutOfRange() throws {
        let keys = try KeyFiles()
        let yaml = issuer(keys, apps: Self.fullApp).replacingOccurrences(of: "session_ttl: 1h", with: "session_ttl: 10m")
        single(yaml, line: 16, "issuer.session_ttl must be between 30m and 7d, got 10m")
        let yaml2 = issuer(keys, apps: Self.fullApp).replacingOccurrences(of: "limited_use_ttl: 5m", with: "limited_use_ttl: 2h")
        single(yaml2, line: 17, "issuer.limited_use_ttl must be between 1m and 1h")
    }

    @Test func anAppListedTwice() throws {
        let keys = try KeyFiles()
        single(issuer(keys, apps: Self.fullApp + "\n" + Self.fullApp), line: 29, "is already listed at line 22")
    }

    @Test func anAppOfAnotherProject() throws {
        let keys = try KeyFiles()
        let yaml = issuer(keys, apps: Self.fullApp.replacingOccurrences(of: "1:123456789012:ios", with: "1:999:ios"))
        single(yaml, line: 22, "belongs to project 999, not app_check.project_number 123456789012")
        let bad = issuer(keys, apps: Self.fullApp.replacingOccurrences(of: "1:123456789012:ios:0a1b2c3d4e5f6a7b", with: "my-app"))
        single(bad, line: 22, "expected 1:<project_number>:<ios|android|web>:<hex>")
    }

    @Test func anUnreadableRootCAOrP8() throws {
        let keys = try KeyFiles()
        let missingRoot = Self.fullApp.replacingOccurrences(
            of: "environments: [production, development]",
            with: "environments: [production]\n        root_ca_file: \(keys.path("nope.pem"))")
        single(issuer(keys, apps: missingRoot), line: 27, "does not exist")
        let notACert = Self.fullApp.replacingOccurrences(
            of: "environments: [production, development]",
            with: "environments: [production]\n        root_ca_file: \(keys.path("sign.pem"))")
        single(issuer(keys, apps: notACert), line: 27, "not a PEM certificate")
        let goodRoot = Self.fullApp.replacingOccurrences(
            of: "environments: [production, development]",
            with: "environments: [production]\n        root_ca_file: \(keys.path("root.pem"))")
        #expect(try load(issuer(keys, apps: goodRoot)).get().issuer?.apps.first?.appAttest?.rootCAFile == keys.path("root.pem"))

        let deviceCheck = { (file: String) in Self.fullApp + """

              device_check:
                key_id: ABC123DEFG
                private_key: \(keys.path(file))
        """ }
        single(issuer(keys, apps: deviceCheck("missing.p8")), line: 31, "does not exist")
        single(issuer(keys, apps: deviceCheck("p384.p8")), line: 31, "DeviceCheck keys are P-256")
        single(issuer(keys, apps: deviceCheck("sign.pem")), line: 31, "not an EC key")
    }

    @Test func aShortDebugSecretIsRefusedWithoutEchoingIt() throws {
        let keys = try KeyFiles()
        let yaml = issuer(keys, apps: Self.fullApp.replacingOccurrences(of: "\"0123456789abcdef0123456\"", with: "\"${UNSET:-}\""))
        let found = errors(yaml)
        #expect(found.count == 1)
        #expect(found.first?.message.contains("is 0 characters long; at least 22 are required") == true)
        let short = issuer(keys, apps: Self.fullApp.replacingOccurrences(of: "\"0123456789abcdef0123456\"", with: "\"hunter2\""))
        let shortErrors = errors(short)
        #expect(shortErrors.count == 1)
        #expect(shortErrors.allSatisfy { !$0.message.contains("hunter2") })
    }

    @Test func appAttestNeedsTeamAndBundle() throws {
        let keys = try KeyFiles()
        let yaml = issuer(keys, apps: Self.fullApp.replacingOccurrences(of: "      team_id: ABCDE12345\n", with: ""))
        single(yaml, line: 24, "needs team_id in the same app")
    }

    @Test func missingRequiredKeysAndUnknownKeys() throws {
        let keys = try KeyFiles()
        let noURL = issuer(keys, apps: Self.fullApp).replacingOccurrences(of: "  issuer_url: https://api.example.com/appcheck\n", with: "")
        single(noURL, line: 12, "missing required key 'issuer_url'")
        let trailing = issuer(keys, apps: Self.fullApp).replacingOccurrences(of: "example.com/appcheck", with: "example.com/appcheck/")
        single(trailing, line: 13, "no trailing '/'")
        let typo = issuer(keys, apps: Self.fullApp).replacingOccurrences(of: "challenge_ttl:", with: "challenge_tll:")
        single(typo, line: 18, "did you mean 'challenge_ttl'?")
        let basePath = issuer(keys, apps: Self.fullApp).replacingOccurrences(of: "base_path: /appcheck", with: "base_path: appcheck/")
        single(basePath, line: 12, "invalid issuer.base_path 'appcheck/'")
        let environment = issuer(keys, apps: Self.fullApp.replacingOccurrences(of: "[production, development]", with: "[staging]"))
        single(environment, line: 26, "expected production or development")
    }
}

/// `routes[].providers` (docs/configuration.md, check 7) and `app_check.trusted_issuers`.
@Suite struct ProvidersAndTrustedIssuersConfigTests {
    static let base = ConfigFixture.minimal

    func load(_ yaml: String) -> Result<Settings, ConfigErrors> { ConfigFixture.load(yaml) }

    func messages(_ yaml: String) -> [String] { ConfigFixture.messages(yaml) }

    @Test func providersAreListedPerRoute() throws {
        let settings = try load(Self.base + "\n    providers: [app_attest, device_check]").get()
        #expect(settings.routes[0].providers == ["app_attest", "device_check"])
        #expect(try load(Self.base).get().routes[0].providers.isEmpty)
        #expect(messages(Self.base + "\n    providers: [app_atest]") == [
            "10:17: invalid provider 'app_atest' in route 'all' providers: expected app_attest, android_key, device_check, play_integrity, recaptcha_v3, recaptcha_enterprise, debug, custom or unspecified",
        ])
        #expect(messages(Self.base + "\n    providers: [debug, debug]") == ["10:24: route 'all' providers lists debug twice"])
        #expect(messages(Self.base + "\n    enforcement: off\n    providers: [debug]") == [
            "11:16: route 'all' providers has no effect with enforcement: off (no token is examined)",
        ])
    }

    @Test func trustedIssuersNeedAnIssAndAKeySet() throws {
        let yaml = Self.base.replacingOccurrences(of: "  project_number: \"123456789012\"", with: """
          project_number: "123456789012"
          trusted_issuers:
            - iss: https://other.example.com/appcheck/123456789012
              jwks_url: https://other.example.com/appcheck/v1/jwks
        """)
        let settings = try load(yaml).get()
        #expect(settings.appCheck.trustedIssuers.map(\.iss) == ["https://other.example.com/appcheck/123456789012"])
        #expect(settings.appCheck.trustedIssuers.map(\.jwksURL) == ["https://other.example.com/appcheck/v1/jwks"])

        let firebase = yaml.replacingOccurrences(of: "https://other.example.com/appcheck/123456789012",
                                                 with: "https://firebaseappcheck.googleapis.com/123456789012")
        #expect(messages(firebase) == ["4:12: app_check.trusted_issuers[0].iss is Firebase's issuer, which app_check.jwks already covers"])
        let badURL = yaml.replacingOccurrences(of: "jwks_url: https://", with: "jwks_url: ftp://")
        #expect(messages(badURL).first?.contains("must start with https://, http:// or file://") == true)
        let missing = yaml.replacingOccurrences(of: "      jwks_url: https://other.example.com/appcheck/v1/jwks\n", with: "")
        #expect(messages(missing) == ["4:7: missing required key 'jwks_url' in app_check.trusted_issuers[0]"])
    }
}

/// Issue 23 #7: an issuer app whose tokens every enforce route would refuse is named by `check-config`.
@Suite struct IssuerAppIdWarningTests {
    @Test func anIssuerAppMissingFromAppIdsIsWarnedAbout() throws {
        var issuer = IssuerSettings()
        issuer.apps = [IssuerAppSettings(appId: "1:1:ios:aa"), IssuerAppSettings(appId: "1:1:ios:bb")]
        #expect(issuer.warnings(allowedAppIds: []).isEmpty, "an empty allow-list admits every app")
        #expect(issuer.warnings(allowedAppIds: ["1:1:ios:aa", "1:1:ios:bb"]).isEmpty)
        let warnings = issuer.warnings(allowedAppIds: ["1:1:ios:aa"])
        #expect(warnings == ["warning: issuer app 1:1:ios:bb is not in app_check.app_ids: enforce routes refuse the tokens minted for it (app_not_allowed)"])
    }
}
