import Synchronization

/// Bytes of one kind the process holds in buffers, counted across loops, with a budget and the trim hysteresis of
/// docs/operations.md (Memory): once the count has been above `trimHighWater` and falls under `trimLowWater`, the
/// caller is told to trim the heap (glibc keeps freed buffers in its arenas, so memory taken by a burst would
/// otherwise not come back).
public final class BufferGauge: Sendable {
    public let limit: Int
    public let trimHighWater: Int
    public let trimLowWater: Int
    private let bytes = Atomic<Int>(0)
    private let wasHigh = Atomic<Bool>(false)

    public init(limit: Int, trimHighWater: Int = 16 << 20, trimLowWater: Int = 1 << 20) {
        self.limit = limit
        self.trimHighWater = trimHighWater
        self.trimLowWater = trimLowWater
    }

    /// Bytes held now.
    public var current: Int { bytes.load(ordering: .relaxed) }

    /// Takes `count` more bytes when they fit under `limit`; false (nothing taken) when they do not.
    public func reserve(_ count: Int) -> Bool {
        let total = bytes.add(count, ordering: .relaxed).newValue
        if total > limit {
            bytes.subtract(count, ordering: .relaxed)
            return false
        }
        if total > trimHighWater, !wasHigh.load(ordering: .relaxed) { wasHigh.store(true, ordering: .relaxed) }
        return true
    }

    /// Gives back `count` bytes; true when the heap should be trimmed now (the count was high and is low again).
    public func release(_ count: Int) -> Bool {
        guard count > 0 else { return false }
        let total = bytes.subtract(count, ordering: .relaxed).newValue
        return total < trimLowWater && wasHigh.load(ordering: .relaxed) && wasHigh.exchange(false, ordering: .relaxed)
    }
}

/// Memory comes back after any burst (SPEC §6; issue 25): glibc keeps freed memory in its arenas, so after a flood of
/// connections or buffered bytes RSS would stay at its peak. The process's peaks are sampled where connections come
/// and go and once a second on each loop (never per request): once the bytes the gateway holds in buffers
/// (`gateway_buffer_bytes`) have been at least `minimumBufferPeak` and are down to an eighth of their peak, or open
/// connections have been at least `minimumConnectionPeak` and are down to an eighth, the heap is trimmed once (a
/// second later, on the loop that noticed) and the peaks start over.
public final class MemoryReclaimer: Sendable {
    /// 2 MiB: with 8 MiB, bursts of 3 MiB (2,000 zero-window streams, slow issuer bodies) never trimmed and left RSS
    /// 10-12% above where it started (`Benchmarks/defects.sh --memory`); a trim is cheap next to such a burst.
    public static let minimumBufferPeak = 2 << 20
    public static let minimumConnectionPeak = 512
    private let bufferPeak = Atomic<Int>(0)
    private let connectionPeak = Atomic<Int>(0)

    public init() {}

    /// Samples the current figures; true when the heap should be trimmed now (true once per burst).
    public func sample(bufferBytes: Int, connections: Int) -> Bool {
        let buffers = bufferPeak.load(ordering: .relaxed)
        if bufferBytes > buffers { bufferPeak.store(bufferBytes, ordering: .relaxed) }
        let conns = connectionPeak.load(ordering: .relaxed)
        if connections > conns { connectionPeak.store(connections, ordering: .relaxed) }
        let buffersFell = buffers >= Self.minimumBufferPeak && bufferBytes <= buffers / 8
        let connectionsFell = conns >= Self.minimumConnectionPeak && connections <= conns / 8
        guard buffersFell || connectionsFell else { return false }
        // One caller wins the trim; the peaks start over from now.
        guard bufferPeak.compareExchange(expected: buffers, desired: bufferBytes, ordering: .relaxed).exchanged else {
            return false
        }
        connectionPeak.store(connections, ordering: .relaxed)
        return true
    }
}
