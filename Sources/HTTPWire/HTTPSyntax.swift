/// Character classes of HTTP (RFC 9110 §5.6) used by the parsers, exposed for callers that build or
/// validate header fields themselves. All functions are allocation-free.
public enum HTTPSyntax {
    /// `tchar` of RFC 9110 §5.6.2: `!#$%&'*+-.^_`|~`, DIGIT and ALPHA.
    @inlinable
    public static func isTChar(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: // DIGIT, ALPHA
            return true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E:
            return true
        default:
            return false
        }
    }

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

    /// ASCII lower-casing of one byte (only `A`–`Z` change).
    @inlinable
    public static func lowercased(_ byte: UInt8) -> UInt8 {
        (byte >= 0x41 && byte <= 0x5A) ? byte | 0x20 : byte
    }

    /// Case-insensitive ASCII comparison of raw bytes with a string whose letters are already lower case.
    /// Does not allocate.
    public static func equalsLowercased(_ bytes: UnsafeRawBufferPointer, _ lowercaseASCII: String) -> Bool {
        let utf8 = lowercaseASCII.utf8
        // Lengths first: most comparisons of header names fail here, without touching the bytes.
        guard utf8.count == bytes.count else { return false }
        if let equal = utf8.withContiguousStorageIfAvailable({ expected -> Bool in
            for i in 0..<expected.count where lowercased(bytes[i]) != expected[i] { return false }
            return true
        }) {
            return equal
        }
        var index = 0
        for expected in utf8 {
            guard lowercased(bytes[index]) == expected else { return false }
            index += 1
        }
        return true
    }

    /// Range of `bytes[start..<end]` without leading and trailing OWS.
    @inlinable
    static func trimOWS(_ bytes: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> (Int, Int) {
        var lower = start
        var upper = end
        while lower < upper, isWhitespace(bytes[lower]) { lower += 1 }
        while upper > lower, isWhitespace(bytes[upper - 1]) { upper -= 1 }
        return (lower, upper)
    }
}
