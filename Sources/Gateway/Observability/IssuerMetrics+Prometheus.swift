import Issuer

extension IssuerMetrics {
    /// Adds the issuer's families to a scrape (`appcheck_issuer_exchanges_total`, `appcheck_issuer_limited_total`).
    func render(_ t: inout MetricsText) {
        t.family("appcheck_issuer_exchanges_total", "counter",
                 "Issuer calls by app, method and result (minted, challenge, jwks, or the refusal category).")
        for (key, total) in totals() {
            t.sample("appcheck_issuer_exchanges_total", [("app_id", key.appId), ("method", key.method), ("result", key.result)],
                     total)
        }
        t.family("appcheck_issuer_limited_total", "counter",
                 "Issuer calls refused by a limit, by rule (per address, per app, process ceiling, debug guesses, challenge bounds, body budget).")
        let limited = limitedCounts()
        for rule in Self.limitRules { t.sample("appcheck_issuer_limited_total", [("rule", rule)], limited[rule] ?? 0) }
    }
}

extension RiskRefresher {
    /// Adds `appcheck_issuer_receipt_refresh_total` to a scrape.
    func render(_ t: inout MetricsText) {
        t.family("appcheck_issuer_receipt_refresh_total", "counter",
                 "App Attest receipt exchanges with Apple by app and result (refreshed, not_yet, no_data, backed_off, refused).")
        for (appId, result, count) in refreshCounts() {
            t.sample("appcheck_issuer_receipt_refresh_total", [("app_id", appId), ("result", result)], count)
        }
    }
}
