import GatewayConfig

/// `ConfigErrorTableTests` rows: `issuer:` and its apps (`app_attest`, `device_check`, debug secrets, fraud risk).
extension ConfigErrorTable {
    static let issuerURL = "  issuer_url: https://gw.example.com/appcheck\n"
    static let signingKeys = "  signing_keys: [\"${D}/server.key\"]\n"
    /// One app with a debug secret, at lines 4–6 when it follows `issuerURL` and `signingKeys`.
    static let oneApp = "  apps:\n    - app_id: \"1:123456789012:ios:0a1b\"\n      debug_secrets: [\"0123456789abcdef0123456\"]\n"

    /// `issuer:` at line 1 with `body` from line 2, then the smallest valid rest.
    static func issuerSection(_ body: String) -> String { "issuer:\n" + body + tail }

    /// `issuer_url` (2), `signing_keys` (3), `apps:` (4) and the app's lines from line 5: `- app_id: "ID"`, then `more`.
    static func app(id: String = "1:123456789012:ios:0a1b", _ more: String) -> String {
        issuerSection(issuerURL + signingKeys + "  apps:\n    - app_id: \"\(id)\"\n" + more)
    }

    /// An Apple app: app_id (5), team_id (6), bundle_id (7), then `more` from line 8.
    static func appleApp(_ more: String) -> String {
        app("      team_id: ABCDE12345\n      bundle_id: com.example.app\n" + more)
    }

    static let secret = "      debug_secrets: [\"0123456789abcdef0123456\"]\n"

    /// A SHA-256 signing-certificate digest in hex, and the two required `android` keys (lines 7–8).
    static let digest = String(repeating: "ab", count: 32)
    static let androidBase = "        package_name: com.example.app\n        signing_cert_sha256: [\"\(digest)\"]\n"

    /// An Android app: app_id (5), `android:` (6), then `more` from line 7.
    static func androidApp(_ more: String) -> String {
        app(id: "1:123456789012:android:0a1b", "      android:\n" + more)
    }

    static let issuer: [ConfigErrorCase] = [
        bad("issuer: [a]\n" + tail, 1, 9, "expected a mapping for issuer, got a list"),
        bad(issuerSection(issuerURL + signingKeys + oneApp + "  base_path: appcheck\n"), 7, 14,
            "invalid issuer.base_path 'appcheck': expected an absolute path such as /appcheck"),
        issuerURLProblem("gw.example.com", "expected an https:// (or http://) URL"),
        issuerURLProblem("https:///x", "the host is missing"),
        issuerURLProblem("https://u@gw.example.com", "user info (user@) is not allowed"),
        issuerURLProblem("https://gw.example.com/a?b", "a query or fragment is not allowed"),
        issuerURLProblem("https://gw.example.com/", "no trailing '/' (iss is <issuer_url>/<project_number>)"),
        issuerURLProblem("https://gw.example.com/a b", "spaces are not allowed"),
        bad(issuerSection(signingKeys + oneApp), 2, 3,
            "missing required key 'issuer_url' in issuer (tokens carry iss = <issuer_url>/<project_number>)"),
        bad(issuerSection(issuerURL + "  signing_keys: []\n" + oneApp), 3, 17, "issuer.signing_keys must name at least one RSA private key"),
        bad(issuerSection(issuerURL + oneApp), 2, 3, "missing required key 'signing_keys' in issuer (RSA 2048–4096 PEM keys; the first signs)"),
        bad(issuerSection(issuerURL + "  signing_keys: [\"${E}/binary.pem\"]\n" + oneApp), 3, 18, "binary.pem' could not be read as text"),
        bad(issuerSection(issuerURL + "  signing_keys: [\"${D}/rsa1024.key\"]\n" + oneApp), 3, 18,
            "rsa1024.key' is an RSA-1024 key; the issuer signs with RSA 2048–4096"),
        bad(issuerSection(issuerURL + "  signing_keys: [\"${D}/ec.key\"]\n" + oneApp), 3, 18, "ec.key' is not an RSA private key in PEM"),
        bad(issuerSection(issuerURL + signingKeys + oneApp + "    - app_id: \"1:123456789012:ios:0a1b\"\n" + secret), 7, 7,
            "issuer.apps[1]: app_id '1:123456789012:ios:0a1b' is already listed at line 5"),
        bad(issuerSection(issuerURL + signingKeys), 2, 3, "missing required key 'apps' in issuer (at least one app)"),
        // The issuer's own iss listed again as a trusted issuer.
        bad("issuer:\n" + issuerURL + signingKeys + oneApp + appCheckYAML
            + "  trusted_issuers:\n    - iss: https://gw.example.com/appcheck/123456789012\n      jwks_url: https://gw.example.com/jwks\n"
            + afterAppCheck, 2, 3,
            "issuer.issuer_url makes this gateway's own issuer, which app_check.trusted_issuers must not list again"),
        // custom_token_issuers (lines 7…).
        customTokenIssuers("    - iss: https://a.example\n      jwks_url: https://a.example/jwks\n"
                           + "    - iss: https://a.example\n      jwks_url: https://a.example/jwks\n", 10, 12,
                           "issuer.custom_token_issuers[1].iss 'https://a.example' is listed twice"),
        customTokenIssuers("    - jwks_url: https://a.example/jwks\n", 8, 7, "missing required key 'iss' in issuer.custom_token_issuers[0]"),
        customTokenIssuers("    - iss: https://a.example\n      jwks_url: ftp://a\n", 9, 17,
                           "issuer.custom_token_issuers[0].jwks_url must start with https://, http:// or file://, got 'ftp://a'"),
        customTokenIssuers("    - iss: https://a.example\n", 8, 7, "missing required key 'jwks_url' in issuer.custom_token_issuers[0]"),
        // state (lines 7…).
        bad(issuerSection(issuerURL + signingKeys + oneApp + "  state:\n    redis_url: http://h\n"), 8, 16,
            "issuer.state.redis_url must start with redis:// or rediss:// (TLS), got 'http://h'"),
        bad(issuerSection(issuerURL + signingKeys + oneApp + "  state:\n    redis_url: redis://\n"), 8, 16,
            "invalid issuer.state.redis_url 'redis://': expected redis://[user:password@]host[:port][/db]"),
    ]

    /// `issuer_url: URL` (the value at 2:15).
    static func issuerURLProblem(_ url: String, _ problem: String) -> ConfigErrorCase {
        bad(issuerSection("  issuer_url: \(url)\n" + signingKeys + oneApp), 2, 15, "invalid issuer.issuer_url '\(url)': \(problem)")
    }

    /// `custom_token_issuers:` at line 7 with `items` from line 8.
    static func customTokenIssuers(_ items: String, _ line: Int, _ column: Int, _ fragment: String) -> ConfigErrorCase {
        bad(issuerSection(issuerURL + signingKeys + oneApp + "  custom_token_issuers:\n" + items), line, column, fragment)
    }

    static let issuerApps: [ConfigErrorCase] = [
        bad(app(id: "1:123:ios", secret), 5, 15,
            "invalid issuer.apps[0].app_id '1:123:ios': expected 1:<project_number>:<ios|android|web>:<hex> as shown in the Firebase console"),
        bad(app(id: "1:999:ios:0a1b", secret), 5, 15,
            "issuer.apps[0].app_id '1:999:ios:0a1b' belongs to project 999, not app_check.project_number 123456789012"),
        bad(issuerSection(issuerURL + signingKeys + "  apps:\n    - debug_secrets: [\"0123456789abcdef0123456\"]\n"), 5, 7,
            "missing required key 'app_id' in issuer.apps[0]"),
        bad(app(secret + "      team_id: abc\n"), 7, 16,
            "invalid issuer.apps[0].team_id 'abc': expected the 10-character Apple Developer Team ID (A–Z, 0–9)"),
        bad(app(secret + "      bundle_id: com.ex_app\n"), 7, 18, "invalid issuer.apps[0].bundle_id 'com.ex_app': letters, digits, '.' and '-' only"),
        bad(app("      bundle_id: com.example.app\n      app_attest: {}\n"), 7, 7, "issuer.apps[0].app_attest needs team_id in the same app"),
        bad(app("      team_id: ABCDE12345\n      device_check:\n        key_id: ABCDE12345\n        private_key: ${D}/ec.key\n"), 7, 7,
            "issuer.apps[0].device_check needs bundle_id in the same app"),
        bad(app("      debug_secrets: [short]\n"), 6, 23,
            "issuer.apps[0].debug_secrets[0] is 5 characters long; at least 22 are required for 128 bits"),
        bad(app("      debug_secrets: [aaaaaaaaaaaaaaaaaaaaaaaaaaaa]\n"), 6, 23,
            "issuer.apps[0].debug_secrets[0] uses fewer than 8 distinct characters: a placeholder, not a secret"),
        bad(app(""), 5, 7, "issuer.apps[0] enables no method: add app_attest, android, device_check, debug_secrets or custom_token_issuers"),
        // app_attest (line 8, its keys from line 9).
        bad(appleApp("      app_attest:\n        environments: [production, production]\n"), 9, 36,
            "issuer.apps[0].app_attest.environments lists production twice"),
        bad(appleApp("      app_attest:\n        environments: []\n"), 9, 23,
            "issuer.apps[0].app_attest.environments must list production, development or both"),
        bad(appleApp("      app_attest:\n        root_ca_file: ${D}/not-pem.txt\n"), 9, 23,
            "not-pem.txt': not a PEM certificate (-----BEGIN CERTIFICATE-----)"),
        bad(appleApp("      app_attest:\n        receipt_root_ca_file: ${D}/not-pem.txt\n"), 9, 31,
            "issuer.apps[0].app_attest.receipt_root_ca_file '"),
        bad(appleApp("      app_attest:\n        risk:\n          api_url: ftp://x\n"), 10, 20,
            "invalid issuer.apps[0].app_attest.risk.api_url 'ftp://x': expected https://host[:port] without a trailing '/'"),
        // device_check (line 8, its keys from line 9).
        bad(appleApp("      device_check:\n        key_id: abc\n        private_key: ${D}/ec.key\n"), 9, 17,
            "invalid issuer.apps[0].device_check.key_id 'abc': expected the 10-character Key ID of the .p8 key (A–Z, 0–9)"),
        bad(appleApp("      device_check:\n        private_key: ${D}/ec.key\n"), 9, 9,
            "missing required key 'key_id' in issuer.apps[0].device_check"),
        deviceCheckKey("${D}/not-pem.txt", "not an unencrypted PEM private key (Apple's .p8 is -----BEGIN PRIVATE KEY-----)"),
        deviceCheckKey("${D}/server.key", "not an EC key (DeviceCheck keys are P-256)"),
        deviceCheckKey("${D}/ec224.key", "an EC key on secp224r1, DeviceCheck keys are P-256"),
        bad(appleApp("      device_check:\n        key_id: ABCDE12345\n"), 9, 9,
            "missing required key 'private_key' in issuer.apps[0].device_check (the AuthKey_<key_id>.p8 file)"),
        bad(appleApp("      device_check:\n        key_id: ABCDE12345\n        private_key: ${D}/ec.key\n        api_url: https://x/\n"), 11, 18,
            "invalid issuer.apps[0].device_check.api_url 'https://x/': expected https://host[:port] without a trailing '/'"),
        // android (line 6, its keys from line 7).
        bad(androidApp("        signing_cert_sha256: [\"\(digest)\"]\n"), 7, 9,
            "missing required key 'package_name' in issuer.apps[0].android"),
        bad(androidApp("        package_name: com.example.app\n"), 7, 9,
            "missing required key 'signing_cert_sha256' in issuer.apps[0].android (the SHA-256 of the app's signing certificate"),
        bad(androidApp("        package_name: com\n        signing_cert_sha256: [\"\(digest)\"]\n"), 7, 23,
            "invalid issuer.apps[0].android.package_name 'com': expected an Android package name such as com.example.app"),
        bad(androidApp("        package_name: com.1example\n        signing_cert_sha256: [\"\(digest)\"]\n"), 7, 23,
            "invalid issuer.apps[0].android.package_name 'com.1example'"),
        bad(androidApp("        package_name: com.example.app\n        signing_cert_sha256: [abc]\n"), 8, 31,
            "invalid issuer.apps[0].android.signing_cert_sha256[0] 'abc': expected the SHA-256 of a signing certificate, 64 hex digits (colons allowed"),
        bad(androidApp("        package_name: com.example.app\n        signing_cert_sha256: [\"\(digest)\", \"\(digest.uppercased())\"]\n"), 8, 99,
            "issuer.apps[0].android.signing_cert_sha256 lists"),
        bad(androidApp("        package_name: com.example.app\n        signing_cert_sha256: []\n"), 8, 30,
            "issuer.apps[0].android.signing_cert_sha256 must list at least one SHA-256 digest"),
        bad(androidApp(androidBase + "        min_patch_level: 2026-13\n"), 9, 26,
            "invalid issuer.apps[0].android.min_patch_level '2026-13': expected a year and month such as 2026-01 (or 202601)"),
        bad(androidApp(androidBase + "        require_strongbox: maybe\n"), 9, 28,
            "invalid value 'maybe' for issuer.apps[0].android.require_strongbox: expected true or false"),
        bad(androidApp(androidBase + "        revocation_url: ftp://x\n"), 9, 25,
            "invalid issuer.apps[0].android.revocation_url 'ftp://x': expected an https://, http:// or file:/// URL"),
        bad(androidApp(androidBase + "        root_ca_file: ${D}/not-pem.txt\n"), 9, 23,
            "not-pem.txt': not a PEM certificate (-----BEGIN CERTIFICATE-----)"),
        bad(androidApp(androidBase + "        root_ca_file: /no/such/roots.pem\n"), 9, 23,
            "issuer.apps[0].android.root_ca_file '/no/such/roots.pem' does not exist"),
        bad(androidApp(androidBase + "        package: x\n"), 9, 9,
            "unknown key 'package' in issuer.apps[0].android (known keys: package_name, signing_cert_sha256,"),
        // Fraud risk.
        bad(app(secret + "      require_risk_metric: true\n"), 7, 28,
            "issuer.apps[0].require_risk_metric needs max_risk_metric above 0 in the same app"),
        bad(app(secret + "      max_risk_metric: 5\n"), 7, 24,
            "issuer.apps[0].max_risk_metric needs app_attest in the same app (the metric comes from App Attest receipts)"),
    ]

    /// `device_check.private_key: PATH` (the value at 10:22) and what is wrong with the key in it.
    static func deviceCheckKey(_ path: String, _ problem: String) -> ConfigErrorCase {
        bad(appleApp("      device_check:\n        key_id: ABCDE12345\n        private_key: \(path)\n"), 10, 22, problem)
    }
}
