import Foundation

/// Warnings (docs/configuration.md, "Warnings"): settings that are valid but cannot do what they say, so an operator
/// who believes they enforce something learns at `check-config` and at start that they do not.
extension ConfigDecoder {
    /// An App Attest app without `device_check`: no receipt is ever refreshed, so Apple's risk metric stays unknown.
    /// `risk:` then does nothing, `max_risk_metric` refuses nothing and `require_risk_metric` refuses every assertion.
    func warnRiskWithoutDeviceCheck(_ f: ConfigFields, _ context: String, _ app: IssuerAppSettings) {
        let why = "without device_check in the same app: receipts are refreshed only with a DeviceCheck key, so the risk metric stays unknown"
        if case let .mapping(appAttest) = f.value("app_attest"),
           let risk = appAttest.pairs.first(where: { if case let .scalar(s) = $0.key { s.string == "risk" } else { false } }),
           !risk.value.isNull {
            warning(ConfigPosition(risk.key), "\(context).app_attest.risk has no effect \(why)")
        }
        if app.maxRiskMetric > 0, let v = f.value("max_risk_metric") {
            warning(ConfigPosition(v), "\(context).max_risk_metric \(app.maxRiskMetric) refuses nothing \(why) (every assertion passes)")
        }
        if app.requireRiskMetric, let v = f.value("require_risk_metric") {
            warning(ConfigPosition(v), "\(context).require_risk_metric refuses every assertion \(why)")
        }
    }

    /// A route's `providers` naming a provider whose tokens nothing configured here can make: no issuer app has that
    /// method (or there is no `issuer:`), or Firebase's key set is off for `unspecified`; a route's `max_risk` when no
    /// issuer app refreshes receipts (so no token carries `risk`). Silent when
    /// `app_check.trusted_issuers` is set: another gateway's issuer may mint any provider.
    func warnUnmintableProviders(appCheck: AppCheckSettings, issuer: IssuerSettings?) {
        guard appCheck.trustedIssuers.isEmpty else { return }
        for mention in providerMentions {
            guard let why = Self.nothingMints(mention.name, appCheck: appCheck, issuer: issuer) else { continue }
            warning(mention.position, "\(mention.context) providers lists \(mention.name), but \(why): no such token can reach this route")
        }
        let refreshes = issuer?.apps.contains { $0.appAttest != nil && $0.deviceCheck != nil } ?? false
        if !refreshes {
            for mention in routeRiskMentions {
                warning(mention.position, "\(mention.context) max_risk checks nothing: tokens carry a risk claim only from an issuer app with both app_attest and device_check (receipts refreshed with Apple), and there is none")
            }
        }
    }

    /// Why no token with provider `name` can be verified here, or nil when one can (or the name is not known here).
    static func nothingMints(_ name: String, appCheck: AppCheckSettings, issuer: IssuerSettings?) -> String? {
        let apps = issuer?.apps ?? []
        let noIssuer = "there is no issuer: section (and no app_check.trusted_issuers)"
        switch name {
        case "unspecified":
            return appCheck.jwks.isNone
                ? "app_check.jwks.url is none (only Firebase's tokens come without a provider claim)" : nil
        case "app_attest", "device_check", "debug", "android_key":
            guard issuer != nil else { return noIssuer }
            let mints = apps.contains { app in
                switch name {
                case "app_attest": app.appAttest != nil
                case "device_check": app.deviceCheck != nil
                case "android_key": app.android != nil
                default: !app.debugSecrets.isEmpty
                }
            }
            let key = name == "debug" ? "debug_secrets" : name == "android_key" ? "android" : name
            return mints ? nil : "no issuer app configures \(key)"
        case "custom":
            guard let issuer else { return noIssuer }
            return issuer.customTokenIssuers.isEmpty ? "issuer.custom_token_issuers is empty" : nil
        case "play_integrity", "recaptcha_v3", "recaptcha_enterprise":
            return "only a trusted issuer's tokens could carry it (Firebase's carry no provider claim) and app_check.trusted_issuers is empty"
        default:
            return nil
        }
    }
}

extension ConfigDecoder {
    /// A route whose path or prefix names a gRPC service (`/package.Service/`, SPEC §6.1) on an `http1` upstream: every
    /// gRPC call to it would be answered 14 UNAVAILABLE (`upstream_not_h2`).
    func warnGRPCOnHTTP1(_ route: RouteSettings, _ matchNode: Node, _ context: String, _ upstream: UpstreamSettings) {
        guard upstream.httpProtocol == .http1 else { return }
        let (key, text, isPrefix): (String, String, Bool) = switch route.match {
        case let .exact(p): ("path", p, false)
        case let .prefix(p): ("prefix", p, true)
        }
        guard Self.looksLikeGRPCService(text, isPrefix: isPrefix) else { return }
        warning(ConfigPosition(matchNode), "\(context) \(key) \(text) looks like a gRPC service, but upstream '\(upstream.name)' has protocol: http1: gRPC calls there are answered 14 UNAVAILABLE (upstream_not_h2); set protocol: h2 on the upstream")
    }

    /// `/package.Service/…`: a first segment of two or more dot-separated identifiers (`[A-Za-z_][A-Za-z0-9_]*`)
    /// whose last one starts with an upper-case letter (protobuf's style for service names: `helloworld.Greeter`,
    /// `grpc.health.v1.Health`), followed by `/` and a method (an exact path), or by `/` or nothing (a prefix).
    /// `/v1.2/` or `/static.files/` are not.
    static func looksLikeGRPCService(_ path: String, isPrefix: Bool) -> Bool {
        guard path.hasPrefix("/") else { return false }
        let rest = path.dropFirst()
        let service = rest.prefix { $0 != "/" }
        let method = rest.dropFirst(service.count)
        if isPrefix {
            guard method.isEmpty || method == "/" else { return false }
        } else {
            guard method.count > 1, !method.dropFirst().contains("/") else { return false }
        }
        let parts = service.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, let last = parts.last?.first, last.isASCII, last.isUppercase else { return false }
        return parts.allSatisfy { part in
            guard let first = part.first, first.isASCII, first.isLetter || first == "_" else { return false }
            return part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        }
    }
}

extension ConfigDecoder {
    /// Keys users put one level too high, with the section they belong to: `shutdown_grace` under `server:` is
    /// `server.limits.shutdown_grace`. Only a pointer for the message; the key stays an error.
    static let misplacedKeys: [String: [String: String]] = [
        "server": Dictionary(uniqueKeysWithValues: [
            "max_connections", "max_connections_per_address", "max_header_bytes", "max_headers", "max_body_bytes",
            "header_timeout", "body_timeout", "idle_timeout", "shutdown_grace",
        ].map { ($0, "server.limits") }),
    ]

    /// The section `key` belongs to when it was written in `context` by mistake, or nil.
    static func sectionOwning(_ key: String, misplacedIn context: String) -> String? { misplacedKeys[context]?[key] }
}
