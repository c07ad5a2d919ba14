/// The assertion counter rule (docs/issuer.md): a counter is accepted only when strictly greater than the stored
/// one, and the caller stores it with one atomic compare-and-set (`UPDATE … WHERE counter < new`, a Redis
/// script, a lock), so two assertions with the same counter never both pass.
public enum AppAttestCounter {
    /// True when `presented` may replace `stored`: `presented > stored`. An equal or smaller counter is a
    /// replay or a cloned key (Apple: possibly a compromised copy of the app).
    public static func accepts(presented: UInt32, stored: UInt32) -> Bool {
        presented > stored
    }

    /// `accepts`, as a failure to throw.
    public static func check(presented: UInt32, stored: UInt32) throws(AppAttestFailure) {
        guard accepts(presented: presented, stored: stored) else {
            throw AppAttestFailure(.counterNotIncreasing, "counter \(presented) is not above the stored \(stored)")
        }
    }
}
