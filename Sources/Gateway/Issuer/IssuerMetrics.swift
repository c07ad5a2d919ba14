import Synchronization

/// `appcheck_issuer_exchanges_total{app_id,method,result}` (docs/issuer.md), process-wide. Labels are bounded:
/// an `app_id` that is not configured and a method name that does not exist are counted as `""` and `unknown`,
/// so a client cannot grow the series without limit.
final class IssuerMetrics: Sendable {
    struct Key: Hashable, Sendable {
        var appId: String
        var method: String
        var result: String
    }

    private let counts = Mutex<[Key: Int]>([:])

    func count(_ outcome: IssuerOutcome, configuredApps: IssuerSettings) {
        let appId = configuredApps.app(outcome.appId) == nil ? "" : outcome.appId
        let known = outcome.method == "jwks" || IssuerMethod(rawValue: outcome.method) != nil
        let key = Key(appId: appId, method: known ? outcome.method : "unknown", result: outcome.result)
        counts.withLock { $0[key, default: 0] += 1 }
    }

    /// Adds the family to a scrape.
    func render(_ t: inout MetricsText) {
        let snapshot = counts.withLock { $0 }
        t.family("appcheck_issuer_exchanges_total", "counter",
                 "Issuer calls by app, method and result (minted, challenge, jwks, or the refusal category).")
        for key in snapshot.keys.sorted(by: { ($0.appId, $0.method, $0.result) < ($1.appId, $1.method, $1.result) }) {
            t.sample("appcheck_issuer_exchanges_total", [("app_id", key.appId), ("method", key.method), ("result", key.result)],
                     snapshot[key] ?? 0)
        }
    }
}
