import AppAttest

/// Writes `CBORValue`s in the preferred (shortest) encoding of RFC 8949 §4.2.1, map entries in the order
/// given: the exact subset `CBORDecoder` accepts. For the simulator and tests; `head` lets a test craft
/// encodings the decoder must refuse.
public enum CBORWriter {
    /// The encoding of `value`.
    public static func encode(_ value: CBORValue) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out)
        return out
    }

    /// An initial byte and argument in the shortest form for `major` (0–7).
    public static func head(major: UInt8, argument: UInt64) -> [UInt8] {
        let type = major << 5
        switch argument {
        case 0..<24: return [type | UInt8(argument)]
        case 24...0xFF: return [type | 24, UInt8(argument)]
        case 0x100...0xFFFF: return [type | 25] + bigEndian(argument, width: 2)
        case 0x1_0000...0xFFFF_FFFF: return [type | 26] + bigEndian(argument, width: 4)
        default: return [type | 27] + bigEndian(argument, width: 8)
        }
    }

    private static func bigEndian(_ value: UInt64, width: Int) -> [UInt8] {
        (0..<width).reversed().map { UInt8(truncatingIfNeeded: value >> (UInt64($0) * 8)) }
    }

    private static func write(_ value: CBORValue, into out: inout [UInt8]) {
        switch value {
        case .unsigned(let n): out += head(major: 0, argument: n)
        case .negative(let n): out += head(major: 1, argument: n)
        case .bytes(let bytes): out += head(major: 2, argument: UInt64(bytes.count)) + bytes
        case .text(let text):
            let utf8 = Array(text.utf8)
            out += head(major: 3, argument: UInt64(utf8.count)) + utf8
        case .array(let elements):
            out += head(major: 4, argument: UInt64(elements.count))
            for element in elements { write(element, into: &out) }
        case .map(let map):
            out += head(major: 5, argument: UInt64(map.entries.count))
            for entry in map.entries {
                switch entry.key {
                case .text(let text): write(.text(text), into: &out)
                case .int(let int): write(int >= 0 ? .unsigned(UInt64(int)) : .negative(UInt64(-1 - int)), into: &out)
                }
                write(entry.value, into: &out)
            }
        }
    }
}

extension CBORMap {
    /// A map from `(key, value)` pairs in order, for building test objects (keys are not checked for duplicates).
    public init(_ pairs: [(CBORKey, CBORValue)]) {
        self.init(entries: pairs.map { CBORMap.Entry(key: $0.0, value: $0.1) })
    }
}
