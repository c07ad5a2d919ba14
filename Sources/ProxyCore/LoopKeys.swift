import AppCheck

/// The key set as one loop sees it: a plain reference replaced by `loop.execute` when a new set arrives,
/// so reading it on the request path takes no lock.
public final class LoopKeys: Sendable {
    public let set: JWKSet
    /// Unix seconds after which the set is stale beyond `max_stale` and must not be used.
    public let usableUntil: Double

    public init(set: JWKSet, usableUntil: Double) {
        self.set = set
        self.usableUntil = usableUntil
    }

    public func usable(at now: Double) -> Bool { now < usableUntil }
}

/// Asks for a key-set refetch when a token names an unknown `kid` (rate-limited by the provider).
public protocol KeyRefetching: AnyObject, Sendable {
    /// True when a refetch was started for this call (the request may wait for it); false when one ran too
    /// recently (`unknown_kid_refresh_interval`).
    func unknownKid(_ kid: String) -> Bool
}
