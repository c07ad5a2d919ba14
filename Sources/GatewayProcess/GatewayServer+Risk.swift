import Gateway
import Issuer

extension GatewayServer {
    /// Runs one pass of the issuer's receipt refresher now (docs/issuer.md "Fraud risk"), as its background loop does
    /// every minute; nil when no issuer app refreshes receipts. For `appcheck-gateway demo`, which shows its
    /// simulated iPhone's metric right after attesting instead of waiting for the next pass.
    public func refreshReceiptsNow() async -> RiskRefresher.Summary? {
        guard let refresher = issuer?.riskRefresher else { return nil }
        return await refresher.runOnce()
    }
}
