import Glibc

/// A remembered object's tail (`StrictJSON.StringMemo.ObjectTail`) matched against the input: the members after a
/// remembered object start read value by value, the bytes between them compared in place (`StrictJSON+Scan.swift`
/// remembers them).
extension StrictJSON.Parser {
    /// The members after a remembered object start (`position` at its end) when the bytes between their values are
    /// those of `tail`: each value scanned as the member-by-member scan scans it (the same depth, slot and memo), the
    /// bytes between compared. That scan would read the same names in the same order from those bytes (unique, as they
    /// were in the object remembered), so it keeps exactly these values and throws exactly where this does. False at
    /// the first bytes that differ, or at a value preceded by more whitespace than remembered (which that scan skips).
    mutating func scanTail(_ tail: StrictJSON.StringMemo.ObjectTail, into slots: inout StrictJSON.MemberSlots,
                           memoSlots: Int) throws(StrictJSON.ParseError) -> Bool {
        try tail.bytes.withUnsafeBufferPointer { (between) throws(StrictJSON.ParseError) -> Bool in
            var from = 0
            for member in tail.members {
                guard skip(between, from, member.end) else { return false }
                from = member.end
                if let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { return false }
                if member.slot >= 0 {
                    memoizing = strings != nil && (memoSlots >> member.slot) & 1 != 0
                    slots.set(member.slot, try parseValue(depth: 1))
                    memoizing = false
                } else {
                    try skipValue(depth: 1)
                }
            }
            return skip(between, from, between.count)
        }
    }

    /// True, with `position` moved past them, when the input at `position` holds `between[from..<to]`. Up to 16 bytes
    /// (a token's `,"exp":` is 7) by two overlapping loads a side, not a call of memcmp.
    @inline(__always)
    private mutating func skip(_ between: UnsafeBufferPointer<UInt8>, _ from: Int, _ to: Int) -> Bool {
        let count = to - from
        guard count <= bytes.count - position else { return false }
        if count > 0, let base = bytes.baseAddress, let other = between.baseAddress {
            let a = UnsafeRawPointer(base + position), b = UnsafeRawPointer(other + from)
            @inline(__always) func differ<T: FixedWidthInteger>(_ type: T.Type) -> Bool {
                let last = count &- MemoryLayout<T>.size
                return a.loadUnaligned(as: T.self) != b.loadUnaligned(as: T.self)
                    || a.loadUnaligned(fromByteOffset: last, as: T.self) != b.loadUnaligned(fromByteOffset: last, as: T.self)
            }
            let different = switch count {
            case 1: a.load(as: UInt8.self) != b.load(as: UInt8.self)
            case 2...3: differ(UInt16.self)
            case 4...7: differ(UInt32.self)
            case 8...16: differ(UInt64.self)
            default: memcmp(a, b, count) != 0
            }
            if different { return false }
        }
        position += count
        return true
    }
}
