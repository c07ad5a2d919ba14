import Synchronization

/// Bytes of one kind the process holds in buffers, counted across loops, with a budget and the trim hysteresis of
/// docs/operations.md (Memory): once the count has been above `trimHighWater` and falls under `trimLowWater`, the
/// caller is told to trim the heap (glibc keeps freed buffers in its arenas, so memory taken by a burst would
/// otherwise not come back).
final class BufferGauge: Sendable {
    let limit: Int
    let trimHighWater: Int
    let trimLowWater: Int
    private let bytes = Atomic<Int>(0)
    private let wasHigh = Atomic<Bool>(false)

    init(limit: Int, trimHighWater: Int = 16 << 20, trimLowWater: Int = 1 << 20) {
        self.limit = limit
        self.trimHighWater = trimHighWater
        self.trimLowWater = trimLowWater
    }

    /// Bytes held now.
    var current: Int { bytes.load(ordering: .relaxed) }

    /// Takes `count` more bytes when they fit under `limit`; false (nothing taken) when they do not.
    func reserve(_ count: Int) -> Bool {
        let total = bytes.add(count, ordering: .relaxed).newValue
        if total > limit {
            bytes.subtract(count, ordering: .relaxed)
            return false
        }
        if total > trimHighWater, !wasHigh.load(ordering: .relaxed) { wasHigh.store(true, ordering: .relaxed) }
        return true
    }

    /// Gives back `count` bytes; true when the heap should be trimmed now (the count was high and is low again).
    func release(_ count: Int) -> Bool {
        guard count > 0 else { return false }
        let total = bytes.subtract(count, ordering: .relaxed).newValue
        return total < trimLowWater && wasHigh.load(ordering: .relaxed) && wasHigh.exchange(false, ordering: .relaxed)
    }
}
