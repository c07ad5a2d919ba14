/// Character classes of HTTP (RFC 9110 §5.6) used by the parsers, exposed for callers that build or
/// validate header fields themselves. All functions are allocation-free.
public enum HTTPSyntax {
    /// `tchar` of RFC 9110 §5.6.2: `!#$%&'*+-.^_`|~`, DIGIT and ALPHA.
    @inlinable
    public static func isTChar(_ byte: UInt8) -> Bool {
        // One load from a constant table (`1` at the byte values that are tchar): about half the instructions of a
        // bit test in two words with its range checks, and field names are scanned byte by byte.
        tcharTable.utf8Start[Int(byte)] == UInt8(ascii: "1")
    }

    /// One character per byte value 0x00–0xFF (64 a line): `1` where the byte is a tchar, `0` elsewhere.
    @usableFromInline static let tcharTable: StaticString = """
        0000000000000000000000000000000001011111001101101111111111000000\
        0111111111111111111111111110001111111111111111111111111111101010\
        0000000000000000000000000000000000000000000000000000000000000000\
        0000000000000000000000000000000000000000000000000000000000000000
        """

    /// `token = 1*tchar` (RFC 9110 §5.6.2). The empty string is not a token.
    public static func isToken(_ string: String) -> Bool {
        var count = 0
        for byte in string.utf8 {
            guard isTChar(byte) else { return false }
            count += 1
        }
        return count > 0
    }

    /// `token = 1*tchar` (RFC 9110 §5.6.2) over raw bytes. An empty buffer is not a token.
    public static func isToken(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !bytes.isEmpty else { return false }
        for byte in bytes where !isTChar(byte) { return false }
        return true
    }

    /// A byte allowed inside a field value (RFC 9110 §5.5): `field-vchar` (VCHAR / obs-text), SP or HTAB.
    /// Every other control byte (including NUL, CR, LF and DEL) is refused.
    @inlinable
    public static func isFieldValueByte(_ byte: UInt8) -> Bool {
        byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
    }

    /// Whether every byte of `bytes` is `isFieldValueByte`. Eight bytes at a time: a word with no byte below 0x20
    /// and none equal to 0x7F is all valid (bytes from 0x80 are obs-text and allowed); only a word that fails goes
    /// through the byte check (HTAB).
    public static func isFieldValue(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        let count = bytes.count
        if let base = bytes.baseAddress {
            let low: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
            while index + 8 <= count {
                let word = UInt64(littleEndian: (base + index).loadUnaligned(as: UInt64.self))
                let below20 = (word &- 0x20 &* low) & ~word & high
                let del = word ^ (0x7F &* low)
                let isDel = (del &- low) & ~del & high
                if below20 | isDel != 0 {
                    for i in index..<(index + 8) where !isFieldValueByte(bytes[i]) { return false }
                }
                index += 8
            }
        }
        while index < count {
            guard isFieldValueByte(bytes[index]) else { return false }
            index += 1
        }
        return true
    }

    /// `OWS` characters (RFC 9110 §5.6.3): SP or HTAB.
    @inlinable
    public static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09
    }

    /// `method == name`, lengths first: two different strings compare through the runtime (about 22 instructions),
    /// and the request path asks several times per request whether the method is one it treats apart (`HEAD`,
    /// `CONNECT`, `POST`, `PATCH`), nearly always of a `GET`.
    @inlinable @inline(__always)
    public static func isMethod(_ method: String, _ name: String) -> Bool {
        method.utf8.count == name.utf8.count && method == name
    }

    /// ASCII lower-casing of one byte (only `A`–`Z` change).
    @inlinable
    public static func lowercased(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }

    /// Case-insensitive ASCII comparison of raw bytes with a literal whose letters are already lower case.
    /// Does not allocate; the literal's bytes are read in place (a `String` literal would go through its UTF-8
    /// view, several times the cost, and this runs for most header fields of every message). Always inlined: the
    /// length test alone settles most calls, and an out-of-line call (the optimizer's choice once `HeaderKind.classify`
    /// grew) cost about 70 instructions each, eight per forwarded request.
    @inlinable @inline(__always)
    public static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ lowercaseASCII: StaticString) -> Bool {
        let count = lowercaseASCII.utf8CodeUnitCount
        // Lengths first: most comparisons of header names fail here, without touching the bytes.
        guard count == bytes.count else { return false }
        let expected = lowercaseASCII.utf8Start
        // 8 to 16 bytes (`connection`, `content-length`, `keep-alive`: the names and values that match on every
        // message): the first and the last eight bytes as two words, which together cover every byte.
        if count >= 8 && count <= 16, let base = bytes.baseAddress {
            let want = UnsafeRawPointer(expected)
            return lowercased(word: base.loadUnaligned(as: UInt64.self)) == want.loadUnaligned(as: UInt64.self)
                && lowercased(word: base.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
                    == want.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
        }
        var index = 0
        while index < count {
            guard lowercased(bytes[index]) == expected[index] else { return false }
            index += 1
        }
        return true
    }

    /// `equalsLowercased(_:_:)` eight bytes a step, then byte by byte: for a long name such as `x-firebase-appcheck`
    /// (the short ones are compared inline, where a call would cost more than it saves).
    public static func equalsLowercasedByWords(_ bytes: UnsafeRawBufferPointer, _ lowercaseASCII: StaticString) -> Bool {
        let count = lowercaseASCII.utf8CodeUnitCount
        guard count == bytes.count else { return false }
        let expected = lowercaseASCII.utf8Start
        var index = 0
        if let base = bytes.baseAddress {
            while index + 8 <= count {
                let word = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                let want = UnsafeRawPointer(expected).loadUnaligned(fromByteOffset: index, as: UInt64.self)
                guard lowercased(word: word) == want else { return false }
                index += 8
            }
        }
        while index < count {
            guard lowercased(bytes[index]) == expected[index] else { return false }
            index += 1
        }
        return true
    }

    /// `lowercased(_:)` of each of the eight bytes of `word` at once: a byte from `A` to `Z` (its high bit clear) gets
    /// 0x20 added; every other byte stays. The range tests add to each byte's low seven bits, which never carries into
    /// the next byte.
    @inlinable
    public static func lowercased(word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        let low7 = word & ~highs
        let atLeastA = low7 &+ ones &* (0x80 - 0x41)  // high bit set where the low seven bits are ≥ 0x41
        let pastZ = low7 &+ ones &* (0x80 - 0x5B)     // … ≥ 0x5B
        let upper = atLeastA & ~pastZ & ~word & highs
        return word | (upper >> 2)
    }

    /// Case-insensitive ASCII comparison of raw bytes with a string whose letters are already lower case
    /// (for names known only at run time, such as `Connection` tokens). Does not allocate.
    public static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, string lowercaseASCII: String) -> Bool {
        guard lowercaseASCII.utf8.count == bytes.count else { return false }
        var expected = lowercaseASCII
        return expected.withUTF8 { utf8 in
            for i in 0..<utf8.count where lowercased(bytes[i]) != utf8[i] { return false }
            return true
        }
    }

    /// Range of `bytes[start..<end]` without leading and trailing OWS.
    @inlinable
    @inline(__always)
    static func trimOWS(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> (Int, Int) {
        var lower = start
        var upper = end
        while lower < upper, isWhitespace(bytes[lower]) { lower += 1 }
        while upper > lower, isWhitespace(bytes[upper - 1]) { upper -= 1 }
        return (lower, upper)
    }
}
