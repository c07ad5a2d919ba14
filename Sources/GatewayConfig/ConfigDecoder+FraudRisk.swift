import Foundation

/// The fraud-risk keys of an issuer app (docs/issuer.md "Fraud risk"), decoded beside the others so errors carry
/// file:line:column the same way.
extension ConfigDecoder {
    static let fraudRiskAppKeys = ["max_risk_metric", "require_risk_metric"]
    static let fraudRiskAppAttestKeys = ["receipt_root_ca_file", "risk"]
    static let receiptRefreshRange: ClosedRange<Double> = 3600...(30 * 86_400)

    /// `max_risk_metric` and `require_risk_metric` of `issuer.apps[]`.
    func decodeFraudRisk(_ f: ConfigFields, _ context: String, into app: inout IssuerAppSettings) {
        if let v = f.value("max_risk_metric"), let n = int(v, "\(context).max_risk_metric", in: 0...1_000_000) {
            app.maxRiskMetric = n
        }
        if let v = f.value("require_risk_metric"), let b = bool(v, "\(context).require_risk_metric") {
            app.requireRiskMetric = b
            if b, f.value("max_risk_metric") == nil || app.maxRiskMetric == 0 {
                error(v, "\(context).require_risk_metric needs max_risk_metric above 0 in the same app")
            }
        }
        if app.maxRiskMetric > 0, f.value("app_attest") == nil, let v = f.value("max_risk_metric") {
            error(v, "\(context).max_risk_metric needs app_attest in the same app (the metric comes from App Attest receipts)")
        }
        if f.value("app_attest") != nil, f.value("device_check") == nil { warnRiskWithoutDeviceCheck(f, context, app) }
    }

    /// `max_risk: N` and `require_risk` of a route (docs/configuration.md): admit tokens whose `risk` claim is at most
    /// N; with `require_risk: true`, refuse tokens without the claim too.
    func decodeRouteRisk(_ f: ConfigFields, _ context: String, enforcement: Enforcement) -> (Int?, Bool) {
        var maxRisk: Int?
        var requireRisk = false
        if let v = f.value("max_risk") {
            if enforcement == .off {
                error(v, "\(context) max_risk has no effect with enforcement: off (no token is examined)")
            } else if let n = int(v, "\(context) max_risk", in: 1...1_000_000) {
                maxRisk = n
                routeRiskMentions.append((context, ConfigPosition(v)))
            }
        }
        if let v = f.value("require_risk"), let b = bool(v, "\(context) require_risk") {
            if b, f.value("max_risk") == nil {
                error(v, "\(context) require_risk: true needs max_risk in the same route")
            } else if b, enforcement == .off {
                error(v, "\(context) require_risk has no effect with enforcement: off (no token is examined)")
            }
            requireRisk = b && maxRisk != nil
        }
        return (maxRisk, requireRisk)
    }

    /// `receipt_root_ca_file` and `risk: { refresh, api_url }` of `issuer.apps[].app_attest`.
    func decodeFraudRisk(_ f: ConfigFields, _ context: String, into settings: inout AppAttestAppSettings) {
        if let v = f.value("receipt_root_ca_file"), let text = string(v, "\(context).receipt_root_ca_file"), !text.isEmpty {
            if let path = readableFile(v, "\(context).receipt_root_ca_file") {
                if let problem = Self.certificateProblem(path) {
                    error(v, "\(context).receipt_root_ca_file '\(path)': \(problem)")
                } else {
                    settings.receiptRootCAFile = path
                }
            }
        }
        guard let node = f.value("risk"), let risk = fields(node, "\(context).risk", known: ["refresh", "api_url"]) else { return }
        if let v = risk.value("refresh") {
            if case .scalar(let scalar) = v, scalar.string == "0" || scalar.string == "off" {
                settings.risk.refresh = 0
            } else if let d = duration(v, "\(context).risk.refresh", in: Self.receiptRefreshRange) {
                settings.risk.refresh = d
            }
        }
        if let v = risk.value("api_url"), let text = string(v, "\(context).risk.api_url"), !text.isEmpty {
            let lower = text.lowercased()
            if lower.hasPrefix("https://") || lower.hasPrefix("http://"), !text.hasSuffix("/"),
               let host = URLComponents(string: text)?.host, !host.isEmpty {
                settings.risk.apiURL = text
            } else {
                error(v, "invalid \(context).risk.api_url '\(text)': expected https://host[:port] without a trailing '/'")
            }
        }
    }
}
