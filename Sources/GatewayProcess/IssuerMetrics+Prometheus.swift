import ProxyCore
import Gateway
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
        t.family("appcheck_issuer_bound_tokens_total", "counter",
                 "Tokens minted bound to a DPoP key (cnf.jkt), by app and method: over result=\"minted\", the bound share.")
        for (appId, method, count) in bound.samples {
            t.sample("appcheck_issuer_bound_tokens_total", [("app_id", appId), ("method", method)], count)
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

extension RiskMetrics {
    /// Adds `appcheck_issuer_risk_metric` (histogram) and `appcheck_issuer_risk_refusals_total` to a scrape, for every
    /// App Attest app.
    func render(_ t: inout MetricsText) {
        guard !apps.isEmpty else { return }
        t.family("appcheck_issuer_risk_metric", "histogram",
                 "Apple's App Attest risk metric of each receipt the refresher stored, by app (attestations on the device in 30 days).")
        for (appId, cumulative, sum, count) in histograms() {
            for (i, le) in Self.riskBuckets.enumerated() {
                t.sample("appcheck_issuer_risk_metric_bucket", [("app_id", appId), ("le", String(le))], cumulative[i])
            }
            t.sample("appcheck_issuer_risk_metric_bucket", [("app_id", appId), ("le", "+Inf")], cumulative[Self.riskBuckets.count])
            t.sample("appcheck_issuer_risk_metric_sum", [("app_id", appId)], sum)
            t.sample("appcheck_issuer_risk_metric_count", [("app_id", appId)], count)
        }
        t.family("appcheck_issuer_risk_refusals_total", "counter",
                 "App Attest assertions refused for risk, by app and rule (risk_metric_exceeded, risk_metric_unknown).")
        for (appId, rule, count) in refusalTotals() {
            t.sample("appcheck_issuer_risk_refusals_total", [("app_id", appId), ("rule", rule)], count)
        }
    }
}
