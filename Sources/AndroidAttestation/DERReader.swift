/// A strict, bounded reader of DER (X.690 §10): one element at a time, over a window of a byte array.
///
/// Refused: the indefinite length form, lengths and tag numbers not in their shortest form, lengths wider than
/// four bytes, tag numbers above `DERLimits.maxTagNumber`, nesting deeper than `DERLimits.maxDepth`, inputs over
/// `DERLimits.maxBytes`. Primitive values are checked by the `read…` helpers (minimal INTEGERs, DER BOOLEANs).
///
/// A pure function of complete input. A proper prefix of a valid encoding fails with `.truncated` and no other
/// kind; reading never goes past the window and never allocates for a declared length (contents are copied
/// only when a caller asks for an OCTET STRING's bytes, which exist).
public struct DERReader {
    /// The whole input; every offset is into it.
    public let bytes: [UInt8]
    private let limits: DERLimits
    private let end: Int
    private let depth: Int
    /// Offset of the next element.
    public private(set) var position: Int

    /// A reader over all of `bytes`, at depth 0 (its elements are depth 1).
    public init(_ bytes: [UInt8], limits: DERLimits = .keyDescription) throws(DERError) {
        guard bytes.count <= limits.maxBytes else { throw DERError(.tooLarge, at: 0) }
        self.init(bytes: bytes, limits: limits, range: 0..<bytes.count, depth: 0)
    }

    private init(bytes: [UInt8], limits: DERLimits, range: Range<Int>, depth: Int) {
        self.bytes = bytes
        self.limits = limits
        self.position = range.lowerBound
        self.end = range.upperBound
        self.depth = depth
    }

    /// Whether every element of the window has been read.
    public var isAtEnd: Bool { position >= end }

    /// Refuses bytes left in the window.
    public func expectEnd() throws(DERError) {
        guard isAtEnd else { throw DERError(.trailingBytes, at: position) }
    }

    /// The tag of the next element without reading it, `nil` at the end of the window.
    public func peekTag() throws(DERError) -> DERTag? {
        guard !isAtEnd else { return nil }
        var copy = self
        return try copy.readIdentifier()
    }

    /// Reads the next element's header and steps over it; its contents are not examined.
    public mutating func next() throws(DERError) -> DERElement {
        let start = position
        let tag = try readIdentifier()
        let length = try readLength(elementStart: start)
        guard length <= end - position else { throw DERError(.truncated, at: end) }
        let contents = position..<(position + length)
        position = contents.upperBound
        return DERElement(tag: tag, start: start, contents: contents)
    }

    /// Reads the next element and refuses it unless its tag is `tag`.
    public mutating func next(_ tag: DERTag) throws(DERError) -> DERElement {
        let element = try next()
        guard element.tag == tag else { throw DERError(.unexpectedTag, at: element.start) }
        return element
    }

    /// A reader over the contents of `element` (which this reader returned), one level deeper.
    public func children(of element: DERElement) throws(DERError) -> DERReader {
        guard element.tag.constructed else { throw DERError(.unexpectedTag, at: element.start) }
        guard depth + 2 <= limits.maxDepth else { throw DERError(.tooDeep, at: element.start) }
        return DERReader(bytes: bytes, limits: limits, range: element.contents, depth: depth + 1)
    }

    // MARK: - Primitive values

    /// Reads an INTEGER (or, with `tag`, an ENUMERATED) in the `Int64` range, minimal two's complement.
    public mutating func readInteger(_ tag: DERTag = .integer) throws(DERError) -> Int64 {
        let element = try next(tag)
        return try Self.integer(bytes, element)
    }

    /// Reads a BOOLEAN; DER allows only 0x00 and 0xFF.
    public mutating func readBoolean() throws(DERError) -> Bool {
        let element = try next(.boolean)
        guard element.contents.count == 1 else { throw DERError(.invalidBoolean, at: element.start) }
        switch bytes[element.contents.lowerBound] {
        case 0x00: return false
        case 0xFF: return true
        default: throw DERError(.invalidBoolean, at: element.start)
        }
    }

    /// Reads an OCTET STRING's bytes (primitive form only, as DER requires).
    public mutating func readOctetString() throws(DERError) -> [UInt8] {
        let element = try next(.octetString)
        return Array(bytes[element.contents])
    }

    /// Reads a NULL.
    public mutating func readNull() throws(DERError) {
        let element = try next(.null)
        guard element.contents.isEmpty else { throw DERError(.invalidNull, at: element.start) }
    }

    /// The value of an INTEGER or ENUMERATED element of `bytes`.
    static func integer(_ bytes: [UInt8], _ element: DERElement) throws(DERError) -> Int64 {
        let contents = element.contents
        guard !contents.isEmpty, contents.count <= 8 else { throw DERError(.invalidInteger, at: element.start) }
        let first = bytes[contents.lowerBound]
        if contents.count > 1 {
            let second = bytes[contents.lowerBound + 1]
            // X.690 §8.3.2: the first nine bits are not all zero nor all one.
            if (first == 0x00 && second & 0x80 == 0) || (first == 0xFF && second & 0x80 != 0) {
                throw DERError(.invalidInteger, at: element.start)
            }
        }
        var value: UInt64 = first & 0x80 != 0 ? ~0 : 0
        for index in contents { value = value << 8 | UInt64(bytes[index]) }
        return Int64(bitPattern: value)
    }

    // MARK: - Headers

    private mutating func readIdentifier() throws(DERError) -> DERTag {
        let start = position
        guard position < end else { throw DERError(.truncated, at: position) }
        let first = bytes[position]
        position += 1
        let tagClass = DERTag.TagClass(rawValue: first >> 6) ?? .privateUse
        let constructed = first & 0x20 != 0
        guard first & 0x1F == 0x1F else {
            return DERTag(tagClass, constructed: constructed, number: UInt32(first & 0x1F))
        }
        // High tag number form (X.690 §8.1.2.4): base 128, no leading 0x80 octet, and only for numbers >= 31.
        var number: UInt32 = 0
        var octets = 0
        while true {
            guard position < end else { throw DERError(.truncated, at: end) }
            let octet = bytes[position]
            position += 1
            octets += 1
            if octets == 1, octet == 0x80 { throw DERError(.nonMinimalEncoding, at: start) }
            guard octets <= 3 else { throw DERError(.tagTooLarge, at: start) }
            number = number << 7 | UInt32(octet & 0x7F)
            if octet & 0x80 == 0 { break }
        }
        guard number >= 31 else { throw DERError(.nonMinimalEncoding, at: start) }
        guard number <= limits.maxTagNumber else { throw DERError(.tagTooLarge, at: start) }
        return DERTag(tagClass, constructed: constructed, number: number)
    }

    private mutating func readLength(elementStart: Int) throws(DERError) -> Int {
        guard position < end else { throw DERError(.truncated, at: position) }
        let first = bytes[position]
        position += 1
        if first < 0x80 { return Int(first) }
        if first == 0x80 { throw DERError(.indefiniteLength, at: elementStart) }
        let width = Int(first & 0x7F)
        guard width <= 4 else { throw DERError(.tagTooLarge, at: elementStart) }
        guard end - position >= width else { throw DERError(.truncated, at: end) }
        var length = 0
        for index in position..<(position + width) { length = length << 8 | Int(bytes[index]) }
        position += width
        // X.690 §10.1: the shortest form; a long form must be needed and have no leading zero octet.
        let minimum = width == 1 ? 0x80 : 1 << (8 * (width - 1))
        guard length >= minimum else { throw DERError(.nonMinimalEncoding, at: elementStart) }
        guard length <= limits.maxBytes else { throw DERError(.tooLarge, at: elementStart) }
        return length
    }
}
