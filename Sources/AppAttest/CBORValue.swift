/// One decoded item of the CBOR subset App Attest uses (RFC 8949 major types 0–5).
public indirect enum CBORValue: Sendable, Equatable {
    /// Major type 0.
    case unsigned(UInt64)
    /// Major type 1: the value is `-1 - n`.
    case negative(UInt64)
    /// Major type 2.
    case bytes([UInt8])
    /// Major type 3, valid UTF-8.
    case text(String)
    /// Major type 4.
    case array([CBORValue])
    /// Major type 5, keys unique.
    case map(CBORMap)

    /// The bytes of a byte string, else `nil`.
    public var bytesValue: [UInt8]? { if case .bytes(let b) = self { b } else { nil } }
    /// The text of a text string, else `nil`.
    public var textValue: String? { if case .text(let t) = self { t } else { nil } }
    /// The elements of an array, else `nil`.
    public var arrayValue: [CBORValue]? { if case .array(let a) = self { a } else { nil } }
    /// The map, else `nil`.
    public var mapValue: CBORMap? { if case .map(let m) = self { m } else { nil } }
    /// An integer (major type 0 or 1) that fits `Int64`, else `nil`.
    public var int64Value: Int64? {
        switch self {
        case .unsigned(let n): n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: nil
        }
    }
}

/// A map key: App Attest uses text keys, COSE keys use small integers.
public enum CBORKey: Sendable, Hashable {
    /// An integer key (major type 0 or 1) in the `Int64` range.
    case int(Int64)
    /// A text key.
    case text(String)
}

/// A CBOR map with its entries in document order and no key twice.
public struct CBORMap: Sendable, Equatable {
    /// One key/value pair.
    public struct Entry: Sendable, Equatable {
        /// The key.
        public let key: CBORKey
        /// The value.
        public let value: CBORValue
        /// Makes an entry.
        public init(key: CBORKey, value: CBORValue) {
            self.key = key
            self.value = value
        }
    }

    /// The entries in document order.
    public let entries: [Entry]

    /// Makes a map; the caller guarantees unique keys (the decoder checks them).
    public init(entries: [Entry]) {
        self.entries = entries
    }

    /// The value under `key`, else `nil` (a linear scan: App Attest maps have at most a handful of entries).
    public subscript(key: CBORKey) -> CBORValue? {
        entries.first(where: { $0.key == key })?.value
    }

    /// The value under the text key `key`.
    public subscript(text key: String) -> CBORValue? { self[.text(key)] }

    /// The keys, in document order.
    public var keys: [CBORKey] { entries.map(\.key) }
}
