import AppAttest
import AppCheck
import COpenSSL
import Foundation
import ReplayStores

/// The `issuer:` section (the self-hosted App Check provider). Every file it names is opened and checked at
/// load time, so a wrong key is a `FILE:LINE:COLUMN` error rather than a failure at the first exchange.
extension ConfigDecoder {
    static let issuerKeys = [
        "base_path", "issuer_url", "signing_keys", "session_ttl", "limited_use_ttl", "challenge_ttl", "state",
        "max_exchanges_per_second", "max_exchanges_per_address", "max_challenges_per_address", "apps",
        "custom_token_issuers",
    ]

    /// The shortest debug secret accepted: 22 characters of base64 carry 128 bits (docs/issuer.md).
    static let minDebugSecretLength = 22

    /// Bounds of the issuer's lifetimes, in seconds.
    static let sessionTTLRange: ClosedRange<Double> = 1800...(7 * 86400)
    static let limitedUseTTLRange: ClosedRange<Double> = 60...3600
    static let challengeTTLRange: ClosedRange<Double> = 10...3600

    func decodeIssuer(_ node: Node, projectNumber: String) -> IssuerSettings {
        var issuer = IssuerSettings()
        guard let f = fields(node, "issuer", known: Self.issuerKeys) else { return issuer }

        if let v = f.value("base_path"), let text = nonEmptyString(v, "issuer.base_path") {
            if !text.hasPrefix("/") || text.hasSuffix("/") || text.contains("//")
                || text.contains(where: { $0 == "?" || $0 == "#" || $0 == "%" || $0.isWhitespace }) {
                error(v, "invalid issuer.base_path '\(text)': expected an absolute path such as /appcheck (leading '/', no trailing '/', no query, spaces or escapes)")
            } else {
                issuer.basePath = text
            }
        }
        if let v = f.value("issuer_url"), let text = nonEmptyString(v, "issuer.issuer_url") {
            if let problem = Self.issuerURLProblem(text) {
                error(v, "invalid issuer.issuer_url '\(text)': \(problem)")
            } else {
                issuer.issuerURL = text
            }
        } else if f.value("issuer_url") == nil {
            error(f.keyPosition("issuer_url") ?? f.position, "missing required key 'issuer_url' in issuer (tokens carry iss = <issuer_url>/<project_number>)")
        }
        if let v = f.value("signing_keys"), let items = list(v, "issuer.signing_keys") {
            if items.isEmpty { error(v, "issuer.signing_keys must name at least one RSA private key") }
            for (i, item) in items.enumerated() {
                if let path = signingKey(item, "issuer.signing_keys[\(i)]") { issuer.signingKeyPaths.append(path) }
            }
        } else if f.value("signing_keys") == nil {
            error(f.keyPosition("signing_keys") ?? f.position, "missing required key 'signing_keys' in issuer (RSA 2048–4096 PEM keys; the first signs)")
        }
        if let v = f.value("session_ttl"), let d = duration(v, "issuer.session_ttl", in: Self.sessionTTLRange) { issuer.sessionTTL = d }
        if let v = f.value("limited_use_ttl"), let d = duration(v, "issuer.limited_use_ttl", in: Self.limitedUseTTLRange) {
            issuer.limitedUseTTL = d
        }
        if let v = f.value("challenge_ttl"), let d = duration(v, "issuer.challenge_ttl", in: Self.challengeTTLRange) {
            issuer.challengeTTL = d
        }
        if let v = f.value("state") { issuer.state = decodeIssuerState(v) }
        if let v = f.value("max_exchanges_per_second"), let n = int(v, "issuer.max_exchanges_per_second", in: 1...1_000_000) {
            issuer.maxExchangesPerSecond = n
        }
        if let v = f.value("max_exchanges_per_address"), let n = int(v, "issuer.max_exchanges_per_address", in: 0...1_000_000) {
            issuer.maxExchangesPerAddress = n
        }
        if let v = f.value("max_challenges_per_address"),
           let n = int(v, "issuer.max_challenges_per_address", in: 0...1_000_000) {
            issuer.maxChallengesPerAddress = n
        }
        if let v = f.value("apps"), let items = list(v, "issuer.apps") {
            var seen: [String: ConfigPosition] = [:]
            for (i, item) in items.enumerated() {
                guard let app = decodeIssuerApp(item, "issuer.apps[\(i)]", projectNumber: projectNumber,
                                                customTokens: f.value("custom_token_issuers") != nil) else { continue }
                if let first = seen[app.appId] {
                    error(item, "issuer.apps[\(i)]: app_id '\(app.appId)' is already listed at line \(first.line)")
                    continue
                }
                seen[app.appId] = ConfigPosition(item)
                issuer.apps.append(app)
            }
        } else if f.value("apps") == nil {
            error(f.keyPosition("apps") ?? f.position, "missing required key 'apps' in issuer (at least one app)")
        }
        if let v = f.value("custom_token_issuers"), let items = list(v, "issuer.custom_token_issuers") {
            var seen: Set<String> = []
            for (i, item) in items.enumerated() {
                let context = "issuer.custom_token_issuers[\(i)]"
                guard let cf = fields(item, context, known: ["iss", "jwks_url"]) else { continue }
                var iss: String?, url: String?
                if let v = cf.value("iss"), let text = nonEmptyString(v, "\(context).iss") {
                    if seen.insert(text).inserted { iss = text } else { error(v, "\(context).iss '\(text)' is listed twice") }
                } else if cf.value("iss") == nil {
                    error(cf.position, "missing required key 'iss' in \(context)")
                }
                if let v = cf.value("jwks_url"), let text = nonEmptyString(v, "\(context).jwks_url") {
                    let lower = text.lowercased()
                    if lower.hasPrefix("https://") || lower.hasPrefix("http://") || lower.hasPrefix("file://") {
                        url = text
                    } else {
                        error(v, "\(context).jwks_url must start with https://, http:// or file://, got '\(text)'")
                    }
                } else if cf.value("jwks_url") == nil {
                    error(cf.position, "missing required key 'jwks_url' in \(context)")
                }
                if let iss, let url { issuer.customTokenIssuers.append(CustomTokenIssuerSettings(iss: iss, jwksURL: url)) }
            }
        }
        return issuer
    }

    /// `app_check.trusted_issuers: [{iss, jwks_url}]` (docs/behaviour.md): key sets of other deployments' issuers.
    /// Each `iss` is unique and is neither Firebase's nor this gateway's own (a key vouches for one issuer).
    func decodeTrustedIssuers(_ node: Node) -> [TrustedIssuerSettings] {
        guard let items = list(node, "app_check.trusted_issuers") else { return [] }
        var result: [TrustedIssuerSettings] = []
        for (i, item) in items.enumerated() {
            let context = "app_check.trusted_issuers[\(i)]"
            guard let f = fields(item, context, known: ["iss", "jwks_url"]) else { continue }
            var iss: String?, url: String?
            if let v = f.value("iss"), let text = nonEmptyString(v, "\(context).iss") {
                if text.hasPrefix("https://firebaseappcheck.googleapis.com/") {
                    error(v, "\(context).iss is Firebase's issuer, which app_check.jwks already covers")
                } else if result.contains(where: { $0.iss == text }) {
                    error(v, "\(context).iss '\(text)' is listed twice")
                } else {
                    iss = text
                }
            } else if f.value("iss") == nil {
                error(f.position, "missing required key 'iss' in \(context)")
            }
            if let v = f.value("jwks_url"), let text = nonEmptyString(v, "\(context).jwks_url") {
                let lower = text.lowercased()
                if lower.hasPrefix("https://") || lower.hasPrefix("http://") || lower.hasPrefix("file://") {
                    url = text
                } else {
                    error(v, "\(context).jwks_url must start with https://, http:// or file://, got '\(text)'")
                }
            } else if f.value("jwks_url") == nil {
                error(f.position, "missing required key 'jwks_url' in \(context)")
            }
            if let iss, let url { result.append(TrustedIssuerSettings(iss: iss, jwksURL: url)) }
        }
        return result
    }

    /// `https://host[/path]` (or `http://`), no trailing `/`, query, fragment or user info: the prefix of `iss`.
    static func issuerURLProblem(_ text: String) -> String? {
        let lower = text.lowercased()
        guard lower.hasPrefix("https://") || lower.hasPrefix("http://") else { return "expected an https:// (or http://) URL" }
        guard let url = URLComponents(string: text), let host = url.host, !host.isEmpty else { return "the host is missing" }
        if url.user != nil || url.password != nil { return "user info (user@) is not allowed" }
        if url.query != nil || url.fragment != nil { return "a query or fragment is not allowed" }
        if text.hasSuffix("/") { return "no trailing '/' (iss is <issuer_url>/<project_number>)" }
        if text.contains(where: { $0.isWhitespace }) { return "spaces are not allowed" }
        return nil
    }

    private func decodeIssuerState(_ node: Node) -> IssuerStateSettings {
        var state = IssuerStateSettings()
        guard let f = fields(node, "issuer.state", known: ["store", "sqlite_path", "redis_url", "key_prefix"]) else { return state }
        if let v = f.value("store"), let store = choice(v, "issuer.state.store", [ReplayStoreKind.memory, .sqlite, .redis]) {
            state.store = store
        }
        if let v = f.value("sqlite_path"), let text = nonEmptyString(v, "issuer.state.sqlite_path") { state.sqlitePath = text }
        if let v = f.value("redis_url"), let text = nonEmptyString(v, "issuer.state.redis_url") {
            let lower = text.lowercased()
            if !(lower.hasPrefix("redis://") || lower.hasPrefix("rediss://")) {
                error(v, "issuer.state.redis_url must start with redis:// or rediss:// (TLS), got '\(text)'")
            } else if let host = URLComponents(string: text)?.host, !host.isEmpty {
                state.redisURL = text
            } else {
                error(v, "invalid issuer.state.redis_url '\(text)': expected redis://[user:password@]host[:port][/db]")
            }
        }
        if let v = f.value("key_prefix"), let text = string(v, "issuer.state.key_prefix") { state.keyPrefix = text }
        return state
    }

    private func decodeIssuerApp(_ node: Node, _ context: String, projectNumber: String, customTokens: Bool) -> IssuerAppSettings? {
        guard let f = fields(node, context, known: [
            "app_id", "team_id", "bundle_id", "app_attest", "device_check", "debug_secrets", "session_ttl", "limited_use_ttl",
            "max_exchanges_per_second", "android",
        ] + Self.fraudRiskAppKeys + Self.dpopAppKeys) else { return nil }
        var appId: String?
        if let v = f.value("app_id"), let text = nonEmptyString(v, "\(context).app_id") {
            switch Self.appIdProjectNumber(text) {
            case nil:
                error(v, "invalid \(context).app_id '\(text)': expected 1:<project_number>:<ios|android|web>:<hex> as shown in the Firebase console")
            case let number? where !projectNumber.isEmpty && number != projectNumber:
                error(v, "\(context).app_id '\(text)' belongs to project \(number), not app_check.project_number \(projectNumber)")
            default:
                appId = text
            }
        } else if f.value("app_id") == nil {
            error(f.position, "missing required key 'app_id' in \(context)")
        }
        var app = IssuerAppSettings(appId: appId ?? "")
        if let v = f.value("team_id"), let text = nonEmptyString(v, "\(context).team_id") {
            if text.count == 10, text.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) {
                app.teamId = text
            } else {
                error(v, "invalid \(context).team_id '\(text)': expected the 10-character Apple Developer Team ID (A–Z, 0–9)")
            }
        }
        if let v = f.value("bundle_id"), let text = nonEmptyString(v, "\(context).bundle_id") {
            if text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) {
                app.bundleId = text
            } else {
                error(v, "invalid \(context).bundle_id '\(text)': letters, digits, '.' and '-' only")
            }
        }
        if let v = f.value("app_attest") {
            app.appAttest = decodeAppAttest(v, "\(context).app_attest")
            requireApple(f, "app_attest", "\(context).app_attest")
        }
        if let v = f.value("device_check") {
            app.deviceCheck = decodeDeviceCheck(v, "\(context).device_check")
            requireApple(f, "device_check", "\(context).device_check")
        }
        if let v = f.value("android") { app.android = decodeAndroid(v, "\(context).android") }
        if let v = f.value("debug_secrets"), let items = list(v, "\(context).debug_secrets") {
            for (i, item) in items.enumerated() {
                guard let secret = string(item, "\(context).debug_secrets[\(i)]") else { continue }
                // Never echo the secret: a message names only its length.
                if secret.count < Self.minDebugSecretLength {
                    error(item, "\(context).debug_secrets[\(i)] is \(secret.count) characters long; at least \(Self.minDebugSecretLength) are required for 128 bits (e.g. a UUID, Firebase's own format; an unset variable expands to nothing)")
                } else if Set(secret.unicodeScalars).count < 8 {
                    error(item, "\(context).debug_secrets[\(i)] uses fewer than 8 distinct characters: a placeholder, not a secret (use a random UUID or 22+ characters of base64)")
                } else {
                    app.debugSecrets.append(secret)
                }
            }
        }
        if let v = f.value("session_ttl"), let d = duration(v, "\(context).session_ttl", in: Self.sessionTTLRange) { app.sessionTTL = d }
        if let v = f.value("limited_use_ttl"), let d = duration(v, "\(context).limited_use_ttl", in: Self.limitedUseTTLRange) {
            app.limitedUseTTL = d
        }
        if let v = f.value("max_exchanges_per_second"),
           let n = int(v, "\(context).max_exchanges_per_second", in: 1...1_000_000) {
            app.maxExchangesPerSecond = n
        }
        decodeFraudRisk(f, context, into: &app)
        decodeAppDPoP(f, context, into: &app)
        if appId != nil, !customTokens, app.methods.isEmpty, f.value("app_attest") == nil, f.value("device_check") == nil,
           f.value("debug_secrets") == nil, f.value("android") == nil {
            error(f.position, "\(context) enables no method: add app_attest, android, device_check, debug_secrets or custom_token_issuers")
        }
        return appId == nil ? nil : app
    }

    /// App Attest and DeviceCheck bind to `<team_id>.<bundle_id>`.
    private func requireApple(_ f: ConfigFields, _ key: String, _ what: String) {
        let at = f.keyPosition(key) ?? f.position
        if f.value("team_id") == nil { error(at, "\(what) needs team_id in the same app") }
        if f.value("bundle_id") == nil { error(at, "\(what) needs bundle_id in the same app") }
    }

    private func decodeAppAttest(_ node: Node, _ context: String) -> AppAttestAppSettings? {
        var settings = AppAttestAppSettings()
        guard let f = fields(node, context, known: ["environments", "root_ca_file"] + Self.fraudRiskAppAttestKeys) else { return nil }
        if let v = f.value("environments"), let items = list(v, "\(context).environments") {
            var environments: [AppAttestEnvironment] = []
            for item in items {
                guard let env = choice(item, "\(context).environments", AppAttestEnvironment.allCases) else { continue }
                if environments.contains(env) { error(item, "\(context).environments lists \(env.rawValue) twice") } else { environments.append(env) }
            }
            if items.isEmpty { error(v, "\(context).environments must list production, development or both") }
            if !environments.isEmpty { settings.environments = environments }
        }
        if let v = f.value("root_ca_file"), let text = string(v, "\(context).root_ca_file"), !text.isEmpty {
            if let path = readableFile(v, "\(context).root_ca_file") {
                if let problem = Self.certificateProblem(path) {
                    error(v, "\(context).root_ca_file '\(path)': \(problem)")
                } else {
                    settings.rootCAFile = path
                }
            }
        }
        decodeFraudRisk(f, context, into: &settings)
        return settings
    }

    private func decodeDeviceCheck(_ node: Node, _ context: String) -> DeviceCheckAppSettings? {
        guard let f = fields(node, context, known: ["key_id", "private_key", "environment", "api_url"]) else { return nil }
        var keyId: String?, keyPath: String?
        if let v = f.value("key_id"), let text = nonEmptyString(v, "\(context).key_id") {
            if text.count == 10, text.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) {
                keyId = text
            } else {
                error(v, "invalid \(context).key_id '\(text)': expected the 10-character Key ID of the .p8 key (A–Z, 0–9)")
            }
        } else if f.value("key_id") == nil {
            error(f.position, "missing required key 'key_id' in \(context)")
        }
        if let v = f.value("private_key") {
            if let path = readableFile(v, "\(context).private_key") {
                if let problem = Self.p256KeyProblem(path) {
                    error(v, "\(context).private_key '\(path)': \(problem)")
                } else {
                    keyPath = path
                }
            }
        } else {
            error(f.position, "missing required key 'private_key' in \(context) (the AuthKey_<key_id>.p8 file)")
        }
        guard let keyId, let keyPath else { return nil }
        var settings = DeviceCheckAppSettings(keyId: keyId, privateKeyPath: keyPath)
        if let v = f.value("environment"), let env = choice(v, "\(context).environment", AppAttestEnvironment.allCases) {
            settings.environment = env
        }
        if let v = f.value("api_url"), let text = string(v, "\(context).api_url"), !text.isEmpty {
            let lower = text.lowercased()
            if (lower.hasPrefix("https://") || lower.hasPrefix("http://")), !text.hasSuffix("/"),
               let host = URLComponents(string: text)?.host, !host.isEmpty {
                settings.apiURL = text
            } else {
                error(v, "invalid \(context).api_url '\(text)': expected https://host[:port] without a trailing '/'")
            }
        }
        return settings
    }

    /// A signing key: readable, an unencrypted PEM RSA private key of 2048–4096 bits.
    private func signingKey(_ node: Node, _ what: String) -> String? {
        guard let path = readableFile(node, what) else { return nil }
        let pem: String
        do { pem = try String(contentsOfFile: path, encoding: .utf8) } catch {
            self.error(node, "\(what) '\(path)' could not be read as text: \(error.localizedDescription)")
            return nil
        }
        do {
            let key = try RSAPrivateKey(pemRepresentation: pem)
            guard (2048...4096).contains(key.bits) else {
                error(node, "\(what) '\(path)' is an RSA-\(key.bits) key; the issuer signs with RSA 2048–4096")
                return nil
            }
            return path
        } catch {
            self.error(node, "\(what) '\(path)' is not an RSA private key in PEM (\(error)); make one with appcheck-gateway keygen")
            return nil
        }
    }

    /// The App ID's project number when `text` is `1:<digits>:<ios|android|web>:<hex>`.
    static func appIdProjectNumber(_ text: String) -> String? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "1",
              !parts[1].isEmpty, parts[1].allSatisfy({ $0.isASCII && $0.isNumber }),
              ["ios", "android", "web"].contains(parts[2]),
              !parts[3].isEmpty, parts[3].allSatisfy({ $0.isASCII && $0.isHexDigit }) else { return nil }
        return String(parts[1])
    }

    /// Why `path` is not a PEM X.509 certificate, or nil when it is one.
    static func certificateProblem(_ path: String) -> String? {
        guard let bio = BIO_new_file(path, "r") else { ERR_clear_error(); return "cannot be opened" }
        defer { BIO_free(bio) }
        guard let cert = PEM_read_bio_X509(bio, nil, nil, nil) else {
            ERR_clear_error()
            return "not a PEM certificate (-----BEGIN CERTIFICATE-----)"
        }
        X509_free(cert)
        return nil
    }

    /// Why `path` is not an unencrypted PKCS#8 P-256 private key (Apple's `.p8`), or nil when it is one.
    static func p256KeyProblem(_ path: String) -> String? {
        guard let bio = BIO_new_file(path, "r") else { ERR_clear_error(); return "cannot be opened" }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, COpenSSL_no_passphrase(), nil) else {
            ERR_clear_error()
            return "not an unencrypted PEM private key (Apple's .p8 is -----BEGIN PRIVATE KEY-----)"
        }
        defer { EVP_PKEY_free(key) }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else { return "not an EC key (DeviceCheck keys are P-256)" }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, &name, name.count, &length) == 1 else {
            ERR_clear_error()
            return "the EC curve could not be read"
        }
        let curve = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard curve == "prime256v1" || curve == "P-256" else { return "an EC key on \(curve), DeviceCheck keys are P-256" }
        return nil
    }
}
