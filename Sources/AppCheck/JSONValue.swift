/// A JSON value (RFC 8259) as produced by `StrictJSON`.
///
/// Objects keep their members in document order; `StrictJSON` guarantees the keys are unique.
/// Strings compare by their UTF-8 bytes in `member(_:)` and `stringEquals(_:)`, never by Unicode
/// canonical equivalence, so a claim matches only the exact bytes that were signed.
public enum JSONValue: Sendable, Equatable {
    /// An object, members in document order, keys unique.
    case object([(key: String, value: JSONValue)])
    /// An array.
    case array([JSONValue])
    /// A string, already unescaped and valid UTF-8.
    case string(String)
    /// A finite number; `isInteger` is true when the literal had no fraction and no exponent.
    case number(Double, isInteger: Bool)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null

    /// A key of at most 8 UTF-8 bytes packed little-endian with its length, for matching an object's members
    /// against known short names in one pass (`ShortKey("iss")`); nil for a longer key. Byte equality, as
    /// `member(_:)`.
    struct ShortKey: Hashable {
        let bits: UInt64
        let count: Int

        init?(_ key: String) {
            var key = key
            guard let packed = key.withUTF8({ ShortKey(utf8: $0) }) else { return nil }
            self = packed
        }

        /// The key whose UTF-8 bytes are `bytes[start..<end]`: one eight-byte load when eight bytes can be read from
        /// `start` (the packing of `init(utf8:)`, without a loop over the bytes).
        @inline(__always)
        init?(in bytes: UnsafeBufferPointer<UInt8>, from start: Int, to end: Int) {
            let count = end - start
            guard count <= 8 else { return nil }
            guard count > 0, start + 8 <= bytes.count, let base = bytes.baseAddress else {
                self.init(utf8: UnsafeBufferPointer(rebasing: bytes[start..<end]))
                return
            }
            let word = UInt64(littleEndian: UnsafeRawPointer(base + start).loadUnaligned(as: UInt64.self))
            let mask: UInt64 = count == 8 ? ~0 : (1 << UInt64(8 * count)) &- 1
            self.init(bits: word & mask, count: count)
        }

        private init(bits: UInt64, count: Int) {
            self.bits = bits
            self.count = count
        }

        /// The key whose UTF-8 bytes are `utf8`.
        init?(utf8: UnsafeBufferPointer<UInt8>) {
            guard utf8.count <= 8 else { return nil }
            var bits: UInt64 = 0
            for (i, byte) in utf8.enumerated() { bits |= UInt64(byte) << UInt64(8 * i) }
            (self.bits, count) = (bits, utf8.count)
        }
    }

    /// The member named `key` (exact UTF-8 match) when this is an object, else `nil`.
    public func member(_ key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        for member in members where utf8Equal(member.key, key) {
            return member.value
        }
        return nil
    }

    /// The members when this is an object.
    public var objectMembers: [(key: String, value: JSONValue)]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// The string when this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The number when this is a number.
    public var numberValue: Double? {
        if case .number(let value, _) = self { return value }
        return nil
    }

    /// The elements when this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let values) = self { return values }
        return nil
    }

    /// True when this is a string whose UTF-8 bytes equal those of `other`.
    public func stringEquals(_ other: String) -> Bool {
        guard case .string(let value) = self else { return false }
        return utf8Equal(value, other)
    }

    /// Structural equality; object members compare in order, strings by UTF-8 bytes.
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { utf8Equal($0.key, $1.key) && $0.value == $1.value }
        case let (.array(a), .array(b)):
            return a == b
        case let (.string(a), .string(b)):
            return utf8Equal(a, b)
        case let (.number(a, ia), .number(b, ib)):
            return a == b && ia == ib
        case let (.bool(a), .bool(b)):
            return a == b
        case (.null, .null):
            return true
        default:
            return false
        }
    }
}
