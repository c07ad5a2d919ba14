/// A ring of `count` buckets, each `width` minutes wide and holding `stride` counters: the newest bucket is
/// `head` (an absolute bucket number, unix minute / width); older ones are overwritten as time moves on, so
/// the memory is fixed at `count × stride × 4` bytes whatever the traffic.
struct DashboardRing: Sendable, Codable, Equatable {
    let width: Int
    let count: Int
    let stride: Int
    /// The newest bucket's absolute number; buckets at or below `head - count` are gone.
    private(set) var head: Int
    /// `count × stride` counters; bucket `b` lives at slot `b % count`. Saturate at `UInt32.max`.
    private(set) var values: [UInt32]

    init(width: Int, count: Int, stride: Int) {
        self.width = width
        self.count = count
        self.stride = stride
        head = 0
        values = [UInt32](repeating: 0, count: count * stride)
    }

    /// True when the decoded shape is the one `init` makes (a file from another build is refused).
    func hasShape(width: Int, count: Int, stride: Int) -> Bool {
        self.width == width && self.count == count && self.stride == stride && values.count == count * stride
            && head >= 0
    }

    var storageBytes: Int { values.count * MemoryLayout<UInt32>.stride }

    private func bucket(_ minute: Int) -> Int { minute >= 0 ? minute / width : 0 }

    /// Moves the ring forward to the bucket holding `minute`, clearing the buckets it skips.
    mutating func advance(toMinute minute: Int) {
        let b = bucket(minute)
        guard b > head else { return }
        let steps = min(b - head, count)
        for s in 1...steps {
            let base = ((head + s) % count) * stride
            for i in base..<(base + stride) { values[i] = 0 }
        }
        head = b
    }

    /// Adds `n` to counter `offset` of the bucket holding `minute`; a minute older than the ring is dropped.
    mutating func add(minute: Int, offset: Int, _ n: Int) {
        guard n > 0, offset >= 0, offset < stride else { return }
        let b = bucket(minute)
        if b > head { advance(toMinute: minute) }
        guard b > head - count else { return }
        let i = (b % count) * stride + offset
        let (sum, overflow) = values[i].addingReportingOverflow(UInt32(clamping: n))
        values[i] = overflow ? UInt32.max : sum
    }

    /// Sums counters `offsets` over the buckets holding minutes `first...last` (clipped to what the ring holds).
    func sum(fromMinute first: Int, toMinute last: Int, offsets: Range<Int>) -> [Int] {
        var out = [Int](repeating: 0, count: offsets.count)
        let lo = max(bucket(first), head - count + 1), hi = min(bucket(last), head)
        guard lo <= hi else { return out }
        for b in lo...hi {
            let base = (b % count) * stride
            for (j, o) in offsets.enumerated() { out[j] += Int(values[base + o]) }
        }
        return out
    }

    /// True when counters `offsets` are zero in every bucket the ring holds.
    func isZero(offsets: Range<Int>) -> Bool {
        for slot in 0..<count {
            for o in offsets where values[slot * stride + o] != 0 { return false }
        }
        return true
    }
}
