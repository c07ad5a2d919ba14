/// The receipt side of the issuer's state (docs/issuer.md "Fraud risk"): the latest verified App Attest receipt of
/// each key, its risk metric, and when the refresher should next exchange it with Apple. Every issuer state
/// store (memory, SQLite, Redis) implements it.
public protocol IssuerReceiptState: IssuerState {
    /// Replaces the key's receipt with a newer verified one, its risk metric (`nil`: unknown, keeps no old value)
    /// and not-before, and sets the next refresh (`nil`: never). False when there is no such key of `appId`.
    func storeReceipt(_ keyId: [UInt8], appId: String, receipt: [UInt8], riskMetric: Int?, notBefore: Double?,
                      refreshAt: Double?) async throws(IssuerStateError) -> Bool

    /// Moves the key's next refresh to `at` (`nil`: never), keeping its receipt. False when there is no such key.
    func scheduleRefresh(_ keyId: [UInt8], appId: String, at: Double?) async throws(IssuerStateError) -> Bool

    /// Up to `limit` keys whose refresh time is at or before `now`, earliest first.
    func keysDueForRefresh(now: Double, limit: Int) async throws(IssuerStateError) -> [AttestedKey]
}
