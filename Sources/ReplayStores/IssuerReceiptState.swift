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

    /// Claims the key's due refresh for the caller, in one atomic step of the store, so that of several gateway
    /// instances sharing it exactly one asks Apple about the key per period: true when the key of `appId` is due at
    /// `now` (its refresh time set and at or before `now`) and no other claim holds it; its refresh time then moves
    /// to `leaseUntil` (a crashed claimer's key comes due again then). False otherwise (another instance has it, or
    /// has already refreshed it). Memory and SQLite: a conditional update; Redis: `SET … NX PX` on a claim key, then
    /// the key's refresh time read again.
    func claimRefresh(_ keyId: [UInt8], appId: String, now: Double, leaseUntil: Double) async throws(IssuerStateError) -> Bool

    /// Gives up a claim once the refresh has been stored (or rescheduled), so the key can be claimed again when it
    /// next comes due. Only the caller's own claim is released.
    func releaseRefreshClaim(_ keyId: [UInt8], appId: String) async throws(IssuerStateError)

    /// The pause of `appId`'s refreshes after Apple failed, when one is recorded (it may have ended: compare `until`
    /// with the clock). Shared by every instance on the store, so a second instance does not ask Apple again at once.
    func refreshPause(appId: String) async throws(IssuerStateError) -> ReceiptRefreshPause?

    /// Records `pause` for `appId` (nil: clears it). Memory: a table of the process; SQLite: a row of
    /// `receipt_refresh_pauses`; Redis: `<prefix>rp:{<app id hex>}`, expiring when the pause does.
    func setRefreshPause(appId: String, _ pause: ReceiptRefreshPause?) async throws(IssuerStateError)
}

/// A pause of one app's receipt refreshes (docs/issuer.md "Fraud risk"): no call to Apple before `until` (unix
/// seconds); `length` (seconds) is what the next failure doubles.
public struct ReceiptRefreshPause: Sendable, Equatable {
    public var until: Double
    public var length: Double
    public init(until: Double, length: Double) {
        self.until = until
        self.length = length
    }
}
