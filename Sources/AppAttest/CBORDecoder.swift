/// A strict decoder for exactly the CBOR subset App Attest uses (RFC 8949): unsigned and negative integers,
/// byte strings, text strings, arrays and maps, all of definite length.
///
/// Refused: tags and simple values/floats (major types 6 and 7), indefinite lengths, reserved additional
/// information, integers and lengths not in their shortest form (RFC 8949 §4.2.1, so every value has exactly
/// one accepted encoding), invalid UTF-8, map keys other than text or `Int64`-range integers, duplicate keys,
/// anything past the caps of `CBORLimits`, and (for `decode`) bytes after the top-level item.
///
/// A pure function of complete input. A proper prefix of a valid encoding fails with `.truncated` and no
/// other kind, so a caller that buffers can tell "need more bytes" from "malformed"; decoding never reads
/// past the input and never allocates more than the input's size for a declared length.
public struct CBORDecoder {
    private let bytes: [UInt8]
    private let limits: CBORLimits
    private var position: Int
    private var items = 0

    private init(bytes: [UInt8], position: Int, limits: CBORLimits) {
        self.bytes = bytes
        self.position = position
        self.limits = limits
    }

    /// Decodes `bytes` as one item with nothing after it.
    public static func decode(_ bytes: [UInt8], limits: CBORLimits = .appAttest) throws(CBORError) -> CBORValue {
        let (value, end) = try decodeItem(bytes, from: 0, limits: limits)
        guard end == bytes.count else { throw CBORError(.trailingBytes, at: end) }
        return value
    }

    /// Decodes the one item starting at `offset` and returns it with the offset just past it; bytes after
    /// it are the caller's. `limits.maxBytes` caps the whole of `bytes`.
    public static func decodeItem(_ bytes: [UInt8], from offset: Int,
                                  limits: CBORLimits = .appAttest) throws(CBORError) -> (value: CBORValue, end: Int) {
        guard bytes.count <= limits.maxBytes else { throw CBORError(.tooLarge, at: 0) }
        guard offset >= 0, offset <= bytes.count else { throw CBORError(.truncated, at: offset) }
        var decoder = CBORDecoder(bytes: bytes, position: offset, limits: limits)
        let value = try decoder.item(depth: 1)
        return (value, decoder.position)
    }

    // MARK: - Items

    private mutating func item(depth: Int) throws(CBORError) -> CBORValue {
        let start = position
        items += 1
        guard items <= limits.maxItems else { throw CBORError(.tooManyItems, at: start) }
        let (major, argument) = try head()
        switch major {
        case 0:
            return .unsigned(argument)
        case 1:
            return .negative(argument)
        case 2:
            return .bytes(try take(argument, itemStart: start))
        case 3:
            let raw = try take(argument, itemStart: start)
            guard let text = String(validating: raw, as: UTF8.self) else { throw CBORError(.invalidUTF8, at: start) }
            return .text(text)
        case 4:
            guard depth + 1 <= limits.maxDepth || argument == 0 else { throw CBORError(.tooDeep, at: start) }
            let count = try containerCount(argument, itemStart: start, bytesPerEntry: 1)
            var elements: [CBORValue] = []
            elements.reserveCapacity(count)
            for _ in 0..<count { elements.append(try item(depth: depth + 1)) }
            return .array(elements)
        default: // 5: `head` refuses 6 and 7
            guard depth + 1 <= limits.maxDepth || argument == 0 else { throw CBORError(.tooDeep, at: start) }
            let count = try containerCount(argument, itemStart: start, bytesPerEntry: 2)
            var entries: [CBORMap.Entry] = []
            entries.reserveCapacity(count)
            var seen = Set<CBORKey>()
            for _ in 0..<count {
                let keyStart = position
                let key = try mapKey()
                guard seen.insert(key).inserted else { throw CBORError(.duplicateKey, at: keyStart) }
                entries.append(CBORMap.Entry(key: key, value: try item(depth: depth + 1)))
            }
            return .map(CBORMap(entries: entries))
        }
    }

    private mutating func mapKey() throws(CBORError) -> CBORKey {
        let start = position
        // Refuse a container key before decoding it: no work is spent on something that cannot be a key.
        if position < bytes.count, bytes[position] >> 5 != 0, bytes[position] >> 5 != 1, bytes[position] >> 5 != 3 {
            throw CBORError(.unsupportedKey, at: start)
        }
        switch try item(depth: limits.maxDepth) {
        case .text(let text): return .text(text)
        case let value:
            guard let int = value.int64Value else { throw CBORError(.unsupportedKey, at: start) }
            return .int(int)
        }
    }

    /// An element count, checked against the item cap and against the bytes left (each element needs at
    /// least one byte), so a huge declared count neither allocates nor loops.
    private func containerCount(_ argument: UInt64, itemStart: Int, bytesPerEntry: UInt64) throws(CBORError) -> Int {
        guard argument <= UInt64(limits.maxItems) else { throw CBORError(.tooManyItems, at: itemStart) }
        guard argument * bytesPerEntry <= UInt64(bytes.count - position) else { throw CBORError(.truncated, at: bytes.count) }
        return Int(argument)
    }

    private mutating func take(_ length: UInt64, itemStart: Int) throws(CBORError) -> [UInt8] {
        guard length <= UInt64(limits.maxBytes) else { throw CBORError(.tooLarge, at: itemStart) }
        guard length <= UInt64(bytes.count - position) else { throw CBORError(.truncated, at: bytes.count) }
        let end = position + Int(length)
        let out = Array(bytes[position..<end])
        position = end
        return out
    }

    // MARK: - Heads

    /// Reads an initial byte and its argument (RFC 8949 §3), refusing what the subset excludes.
    private mutating func head() throws(CBORError) -> (major: UInt8, argument: UInt64) {
        let start = position
        guard position < bytes.count else { throw CBORError(.truncated, at: position) }
        let initial = bytes[position]
        let major = initial >> 5
        let info = initial & 0x1F
        guard major <= 5 else { throw CBORError(.unsupportedType, at: start) }
        position += 1
        let width: Int
        switch info {
        case 0..<24: return (major, UInt64(info))
        case 24: width = 1
        case 25: width = 2
        case 26: width = 4
        case 27: width = 8
        case 31: throw CBORError(.indefiniteLength, at: start)
        default: throw CBORError(.reservedAdditionalInfo, at: start)
        }
        guard bytes.count - position >= width else { throw CBORError(.truncated, at: bytes.count) }
        var argument: UInt64 = 0
        for index in position..<(position + width) { argument = argument << 8 | UInt64(bytes[index]) }
        position += width
        // The shortest form: a one-byte argument must be >= 24, a wider one must not fit the next narrower width.
        let minimum: UInt64 = width == 1 ? 24 : 1 << (UInt64(width) * 4)
        guard argument >= minimum else { throw CBORError(.nonMinimalEncoding, at: start) }
        return (major, argument)
    }
}
