import Synchronization

/// Built-in (issuer) request-body bytes held per client address, across every loop (issue 39): one address with
/// hundreds of slow connections each declaring 64 KiB held the whole process budget (`BuiltinBodyBudget.limit`),
/// and every other address's exchanges were answered 503 for as long as it trickled. Each address may hold at
/// most `BuiltinBodyBudget.perAddress` of it. Touched when an issuer body is reserved and released, never on the
/// proxy path. Addresses at 0 are removed, so the table holds at most one entry per issuer request in progress.
public final class BuiltinBodyShares: Sendable {
    private let held = Mutex<[String: Int]>([:])

    public init() {}

    /// Takes `count` more bytes for `address`; false, taking nothing, when the address would hold more than `limit`.
    public func reserve(_ count: Int, for address: String, limit: Int) -> Bool {
        held.withLock { h in
            let now = h[address, default: 0]
            guard now + count <= limit else { return false }
            h[address] = now + count
            return true
        }
    }

    /// Gives back `count` bytes `address` held.
    public func release(_ count: Int, for address: String) {
        guard count > 0 else { return }
        held.withLock { h in
            guard let now = h[address] else { return }
            if now > count {
                h[address] = now - count
                return
            }
            h.removeValue(forKey: address)
            // After a burst from many addresses has gone, give the table's memory back.
            if h.isEmpty { h = [:] }
        }
    }

    /// Bytes `address` holds now (tests).
    public func bytes(_ address: String) -> Int { held.withLock { $0[address, default: 0] } }
}
