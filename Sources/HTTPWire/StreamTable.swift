/// The streams of one HTTP/2 connection by id: an open-addressed table (linear probing, at most half full) with the
/// last stream looked up kept beside it.
///
/// nghttp2 reports a request as a run of callbacks for one stream (begin headers, each header, the frame, data,
/// close), and the gateway's side answers it stream by stream, so most lookups ask for the id asked for just
/// before: those return the kept entry without probing. The others cost one multiplication and, usually, one
/// comparison: a profile of HTTP/2 over TLS counted about 11 `Dictionary` operations per request, ~1,300
/// instructions of SipHash and probing, before this table replaced the `Dictionary`.
///
/// Stream ids are chosen by the peer, so the slot of an id is `(id × k) >> (64 − bits)` with `k` a random odd
/// 64-bit multiplier drawn once per process (multiplicative hashing): a peer that does not know `k` cannot pick ids
/// that share a slot, and even ids that all collide cost at most one probe per stream it holds open, which
/// `SETTINGS_MAX_CONCURRENT_STREAMS` bounds. Removal shifts the entries behind back (no tombstones), so a
/// long-lived connection never degrades. Id 0 (never a stream's, RFC 9113 §5.1.1) marks an empty slot.
///
/// Memory: nothing until the first stream; then 8 slots (16 bytes each), doubled whenever more than half are in use.
/// `removeAll` gives the storage back.
public struct StreamTable<Value: AnyObject> {
    @usableFromInline
    struct Slot {
        @usableFromInline var id: Int32
        @usableFromInline var value: Value?

        @inlinable
        init(id: Int32, value: Value?) {
            self.id = id
            self.value = value
        }
    }

    @usableFromInline var slots: [Slot] = []
    /// `64 - log2(slots.count)`: the product's top bits give the slot.
    @usableFromInline var shift: UInt64 = 64
    public private(set) var count = 0
    @usableFromInline var lastID: Int32 = 0
    @usableFromInline var lastValue: Value?
    /// The process's multiplier (odd, so the map from id to product is a bijection), kept here so a look-up does
    /// not go through the global's lazy initialisation.
    @usableFromInline let multiplier = streamTableMultiplier

    public init() {}

    @inlinable
    func home(_ id: Int32) -> Int {
        Int(truncatingIfNeeded: (UInt64(UInt32(bitPattern: id)) &* multiplier) >> shift)
    }

    /// The slot holding `id`, or nil.
    @inlinable
    func index(of id: Int32) -> Int? {
        guard count > 0, id != 0 else { return nil }
        let mask = slots.count - 1
        var i = home(id)
        while true {
            let at = slots[i].id
            if at == id { return i }
            if at == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    public subscript(id: Int32) -> Value? {
        @inline(__always)
        mutating get {
            if id == lastID, id != 0 { return lastValue }
            return lookUp(id)
        }
        set {
            guard let newValue else {
                removeValue(forKey: id)
                return
            }
            precondition(id != 0, "stream id 0 is the connection's, never a stream's")
            if let i = index(of: id) {
                slots[i].value = newValue
            } else {
                if (count + 1) * 2 > slots.count { grow() }
                insertNew(id, newValue)
                count += 1
            }
            (lastID, lastValue) = (id, newValue)
        }
    }

    /// A look-up of an id other than the last one: remembered when found.
    @usableFromInline
    mutating func lookUp(_ id: Int32) -> Value? {
        guard let i = index(of: id) else { return nil }
        let value = slots[i].value
        (lastID, lastValue) = (id, value)
        return value
    }

    /// Places an id known to be absent (room is known to exist).
    private mutating func insertNew(_ id: Int32, _ value: Value) {
        let mask = slots.count - 1
        var i = home(id)
        while slots[i].id != 0 { i = (i + 1) & mask }
        slots[i] = Slot(id: id, value: value)
    }

    private mutating func grow() {
        let old = slots
        let capacity = max(8, old.count * 2)
        slots = Array(repeating: Slot(id: 0, value: nil), count: capacity)
        shift = UInt64(64 - capacity.trailingZeroBitCount)
        for slot in old where slot.id != 0 { insertNew(slot.id, slot.value!) }
    }

    @discardableResult
    public mutating func removeValue(forKey id: Int32) -> Value? {
        if id == lastID { forget() }
        guard var hole = index(of: id) else { return nil }
        let removed = slots[hole].value
        count -= 1
        // Backward-shift deletion: every entry after the hole, up to the next empty slot, whose home is not
        // cyclically within (hole, j] moves into the hole, so each entry stays reachable from its home.
        let mask = slots.count - 1
        var j = hole
        while true {
            j = (j + 1) & mask
            let id = slots[j].id
            if id == 0 { break }
            let h = home(id)
            let stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j)
            if !stays {
                // A swap moves both entries without touching their reference counts; the removed one travels
                // to the last hole and is dropped there.
                slots.swapAt(hole, j)
                hole = j
            }
        }
        slots[hole] = Slot(id: 0, value: nil)
        return removed
    }

    /// Forgets every stream and gives the storage back.
    public mutating func removeAll() {
        forget()
        slots = []
        shift = 64
        count = 0
    }

    public var isEmpty: Bool { count == 0 }

    /// The streams, in no particular order (a copy: the table may change while they are visited).
    public var values: [Value] {
        var out: [Value] = []
        out.reserveCapacity(count)
        for slot in slots where slot.id != 0 { if let v = slot.value { out.append(v) } }
        return out
    }

    /// The ids, in no particular order.
    public var keys: [Int32] {
        var out: [Int32] = []
        out.reserveCapacity(count)
        for slot in slots where slot.id != 0 { out.append(slot.id) }
        return out
    }

    @usableFromInline
    mutating func forget() {
        lastID = 0
        lastValue = nil
    }
}

/// `StreamTable`'s multiplier: random, odd, drawn once per process.
private let streamTableMultiplier: UInt64 = {
    var g = SystemRandomNumberGenerator()
    return g.next() | 1
}()
