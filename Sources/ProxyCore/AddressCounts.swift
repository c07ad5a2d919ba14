import EventLoop

/// Requests in progress per client address (`UpstreamPool`'s `max_upstream_requests_per_address` counts). Few
/// addresses have requests in progress on one loop at a time, so the first `inlineLimit` live in a short array searched
/// by comparing two words each (no hashing: a hashed look-up of the key cost about 190 instructions, and every request
/// took two); the rest go to a dictionary, so many addresses at once stay O(1) each. An address whose count returns to
/// 0 is removed: it holds at most one entry per request in progress.
public struct AddressCounts {
    /// Entries searched linearly before the dictionary is used.
    public static let inlineLimit = 8
    private var few: [(key: ConnectionAddressKey, count: Int)] = []
    private var many: [ConnectionAddressKey: Int] = [:]

    public init() {}

    /// The requests of `key` in progress.
    package func count(_ key: ConnectionAddressKey) -> Int {
        for entry in few where entry.key == key { return entry.count }
        return many.isEmpty ? 0 : many[key, default: 0]
    }

    /// Counts one more request of `key` and returns how many it now holds; nil, counting nothing, when it already
    /// holds `limit` (0 = no bound) and `exempt()` is false.
    package mutating func increment(_ key: ConnectionAddressKey, limit: Int, exempt: () -> Bool) -> Int? {
        if let i = few.firstIndex(where: { $0.key == key }) {
            let held = few[i].count
            if limit > 0 && held >= limit && !exempt() { return nil }
            few[i].count = held + 1
            return held + 1
        }
        if many.isEmpty && few.count < Self.inlineLimit {
            // A new address with no count anywhere: `limit` >= 1 admits it.
            few.append((key, 1))
            return 1
        }
        // An address at its limit holds at least one request, so a refusal never leaves a new entry behind.
        return Self.bump(&many[key, default: 0], limit: limit, exempt: exempt)
    }

    private static func bump(_ held: inout Int, limit: Int, exempt: () -> Bool) -> Int? {
        if limit > 0 && held >= limit && !exempt() { return nil }
        held += 1
        return held
    }

    /// One request of `key` is over; returns how many it held before (0 when it held none).
    package mutating func decrement(_ key: ConnectionAddressKey) -> Int {
        if let i = few.firstIndex(where: { $0.key == key }) {
            let held = few[i].count
            if held > 1 {
                few[i].count = held - 1
            } else {
                few.swapAt(i, few.count - 1)
                few.removeLast()
            }
            return held
        }
        guard let index = many.index(forKey: key) else { return 0 }
        let held = many.values[index]
        if held > 1 {
            many.values[index] = held - 1
        } else {
            many.remove(at: index)
            if many.isEmpty && many.capacity > 1024 { many = [:] }
        }
        return held
    }
}
