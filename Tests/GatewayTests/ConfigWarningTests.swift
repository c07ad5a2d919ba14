import Foundation
@testable import GatewayConfig
import GatewayTools
import TestSupport
import Testing

/// Issue 39: the shipped examples are safe as they are, and settings that load but cannot do what they say are warned
/// about with their position, by `check-config` and at `serve` start.
@Suite struct ConfigWarningTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A folder with an RSA-2048 signing key and a P-256 `.p8`, made by the `openssl` CLI.
    final class Files {
        let dir: URL
        init() throws {
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("config-warnings-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            for arguments in [["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path("sign.pem")],
                              ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path("AuthKey.p8")]] {
                let r = try Run.command("openssl", arguments)
                guard r.status == 0 else { throw HarnessError("openssl failed: \(r.stderr)") }
            }
        }
        deinit { try? FileManager.default.removeItem(at: dir) }
        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }
    }

    /// Every variable the examples read (their header comments name them), with values a user would give.
    static func exampleEnvironment(_ files: Files) -> [String: String] {
        [
            "FIREBASE_PROJECT_NUMBER": "123456789012",
            "IOS_APP_ID": "1:123456789012:ios:0a1b2c3d4e5f6a7b",
            "APPLE_TEAM_ID": "ABCDE12345",
            "IOS_BUNDLE_ID": "com.example.app",
            "ISSUER_URL": "https://api.example.com/appcheck",
            "CI_APPCHECK_DEBUG_SECRET": "0b5e9d0c-7a53-4c1e-9f0e-3f4a2b1c6d7e",
            "ISSUER_SIGNING_KEY": files.path("sign.pem"),
            "ISSUER_SQLITE": files.path("issuer.sqlite"),
            "REPLAY_SQLITE": files.path("replay.sqlite"),
        ]
    }

    /// Every `Config/*.example.yaml` loads, warns about nothing, and no route that examines tokens admits a debug
    /// token when anything here could verify one (an issuer app with `debug_secrets`, or a trusted issuer).
    @Test func everyExampleLoadsAndKeepsDebugTokensOffItsRoutes() throws {
        let files = try Files()
        let config = Self.repoRoot.appendingPathComponent("Config")
        let examples = try FileManager.default.contentsOfDirectory(atPath: config.path)
            .filter { $0.hasSuffix(".example.yaml") }.sorted()
        #expect(examples.contains("issuer.example.yaml") && examples.contains("gateway.example.yaml"), "\(examples)")
        for name in examples {
            let path = config.appendingPathComponent(name).path
            let settings: Settings
            switch ConfigLoader.load(path: path, environment: Self.exampleEnvironment(files)) {
            case let .success(s): settings = s
            case let .failure(errors):
                Issue.record("\(name) does not load: \(errors)")
                continue
            }
            #expect(settings.warnings.isEmpty, "\(name): \(settings.warnings)")
            let debugCanBeVerified = settings.issuer?.apps.contains { !$0.debugSecrets.isEmpty } == true
                || !settings.appCheck.trustedIssuers.isEmpty
            guard debugCanBeVerified else { continue }
            for route in settings.routes where route.enforcement != .off {
                #expect(!route.providers.isEmpty && !route.providers.contains("debug"),
                        "\(name): route '\(route.name)' admits debug tokens (providers: \(route.providers.sorted()))")
            }
        }
    }

    static let head = """
    app_check:
      project_number: "123456789012"
    upstreams:
      api:
        url: http://127.0.0.1:3000

    """

    func issuer(_ files: Files, app: String) -> String {
        """
        issuer:
          issuer_url: https://api.example.com/appcheck
          signing_keys: [\(files.path("sign.pem"))]
          state: { store: memory }
          apps:
            - app_id: "1:123456789012:ios:0a1b2c3d4e5f6a7b"
              team_id: ABCDE12345
              bundle_id: com.example.app
        \(app)
        """
    }

    static func warnings(_ yaml: String) -> [String] {
        switch ConfigLoader.load(yaml: yaml, path: "gw.yaml", environment: [:]) {
        case let .success(settings): return settings.warnings
        case let .failure(errors): return ["does not load: \(errors)"]
        }
    }

    /// `risk:`, `max_risk_metric` and `require_risk_metric` on an App Attest app without `device_check`: the refresher
    /// never runs, so each is warned about where it is written; with `device_check` nothing is.
    @Test func riskSettingsWithoutDeviceCheckAreWarnedAbout() throws {
        let files = try Files()
        let app = """
              app_attest:
                environments: [production]
                risk: { refresh: 24h }
              max_risk_metric: 20
              require_risk_metric: true
        """
        let routes = "routes:\n  - { name: all, prefix: /, upstream: api }\n"
        let yaml = Self.head + routes + issuer(files, app: app)
        let prefix = "without device_check in the same app: receipts are refreshed only with a DeviceCheck key, so the risk metric stays unknown"
        #expect(Self.warnings(yaml) == [
            "gw.yaml:18:9: warning: issuer.apps[0].app_attest.risk has no effect \(prefix)",
            "gw.yaml:19:24: warning: issuer.apps[0].max_risk_metric 20 refuses nothing \(prefix) (every assertion passes)",
            "gw.yaml:20:28: warning: issuer.apps[0].require_risk_metric refuses every assertion \(prefix)",
        ])
        let withDeviceCheck = yaml + "\n      device_check: { key_id: ABC123DEFG, private_key: \(files.path("AuthKey.p8")) }\n"
        #expect(Self.warnings(withDeviceCheck) == [])
    }

    /// A route's `providers` naming a provider nothing here mints, and `max_risk` where no token can carry `risk`;
    /// silent once a trusted issuer (which may mint anything) is configured.
    @Test func providersNothingMintsAreWarnedAbout() throws {
        let files = try Files()
        let routes = """
        routes:
          - { name: redeem, path: /redeem, upstream: api, providers: [app_attest, device_check, debug, custom], max_risk: 5 }
          - { name: rest, prefix: /, upstream: api, providers: [unspecified, play_integrity] }

        """
        let app = """
              app_attest: { environments: [production] }
        """
        let warnings = Self.warnings(Self.head + routes + issuer(files, app: app))
        #expect(warnings == [
            "gw.yaml:7:75: warning: route 'redeem' providers lists device_check, but no issuer app configures device_check: no such token can reach this route",
            "gw.yaml:7:89: warning: route 'redeem' providers lists debug, but no issuer app configures debug_secrets: no such token can reach this route",
            "gw.yaml:7:96: warning: route 'redeem' providers lists custom, but issuer.custom_token_issuers is empty: no such token can reach this route",
            "gw.yaml:7:115: warning: route 'redeem' max_risk checks nothing: tokens carry a risk claim only from an issuer app with both app_attest and device_check (receipts refreshed with Apple), and there is none",
            "gw.yaml:8:70: warning: route 'rest' providers lists play_integrity, but only a trusted issuer's tokens could carry it (Firebase's carry no provider claim) and app_check.trusted_issuers is empty: no such token can reach this route",
        ], "\(warnings)")
        // Without an issuer section at all, app_attest is named too.
        let bare = Self.warnings(Self.head + "routes:\n  - { name: all, prefix: /, upstream: api, providers: [app_attest] }\n")
        #expect(bare == ["gw.yaml:7:56: warning: route 'all' providers lists app_attest, but there is no issuer: section (and no app_check.trusted_issuers): no such token can reach this route"],
                "\(bare)")
        // android_key is named when no app configures android:, like the other issuer providers.
        let android = Self.warnings(Self.head + "routes:\n  - { name: all, prefix: /, upstream: api, providers: [app_attest, android_key] }\n"
                                    + issuer(files, app: app))
        #expect(android == ["gw.yaml:7:68: warning: route 'all' providers lists android_key, but no issuer app configures android: no such token can reach this route"],
                "\(android)")
        let trusted = Self.head.replacingOccurrences(of: "  project_number: \"123456789012\"\n", with: """
          project_number: "123456789012"
          trusted_issuers:
            - iss: https://other.example.com/appcheck/123456789012
              jwks_url: https://other.example.com/appcheck/v1/jwks

        """) + routes + issuer(files, app: app)
        #expect(Self.warnings(trusted) == [])
    }

    /// `check-config` prints the warnings (and exits 0: they do not block), its admin line names `/dashboard`, and
    /// `serve` logs each warning at start.
    @Test func checkConfigPrintsAndServeLogsTheWarnings() throws {
        let files = try Files()
        let yaml = Self.head + "routes:\n  - { name: all, prefix: /, upstream: api, providers: [device_check] }\n"
            + issuer(files, app: "      debug_secrets: [\"0b5e9d0c-7a53-4c1e-9f0e-3f4a2b1c6d7e\"]")
        let path = files.path("gw.yaml")
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let expected = "\(path):7:56: warning: route 'all' providers lists device_check, but no issuer app configures device_check: no such token can reach this route"
        let checked = try Run.command(Run.gatewayBinary, ["check-config", "--config", path])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stdout.contains(expected + "\n"), "\(checked.stdout)")
        #expect(checked.stdout.contains("/metrics /healthz /readyz /dashboard"), "\(checked.stdout)")

        let harness = try GatewayHarness { upstream in
            GatewayHarness.config(upstream: upstream, routes: "  - { name: all, prefix: /, upstream: api, providers: [device_check] }",
                                  appCheck: "  jwks: { url: none }")
                + "\n" + issuer(files, app: "      debug_secrets: [\"0b5e9d0c-7a53-4c1e-9f0e-3f4a2b1c6d7e\"]")
        }
        defer { harness.stop() }
        #expect(harness.logged("providers lists device_check, but no issuer app configures device_check"), "\(harness.logLines())")
        let line = harness.logLines().first { $0.contains("providers lists device_check") } ?? ""
        #expect(line.contains("\"severity\":\"WARNING\""), "\(line)")
    }
}
