/// The header fields of one parsed head, stored without a `String` per field.
///
/// `bytes` is a copy of the whole head region (start line, field lines and the terminating empty line) and
/// `fields` holds, per field line in arrival order, the ranges of its name and of its OWS-trimmed value
/// (RFC 9112 §5.1). Every range was validated by the parser: names are tokens (RFC 9110 §5.1), values
/// contain only `field-vchar`, SP and HTAB (RFC 9110 §5.5). Strings are only made when asked for.
///
/// Indices passed to the `at:` accessors must be in `0..<count` (programmer error otherwise, like any
/// collection subscript); they are never derived from network bytes.
public struct HTTPHeaders: Hashable, Sendable {
    /// The head bytes the ranges in `fields` point into.
    public let bytes: [UInt8]
    /// One entry per field line, in arrival order.
    public let fields: [HTTPHeaderField]

    /// Creates headers over `bytes`. Every range in `fields` must lie inside `bytes` (the parsers
    /// guarantee it; a range outside is clamped to an empty one rather than trusted).
    public init(bytes: [UInt8], fields: [HTTPHeaderField]) {
        self.bytes = bytes
        let limit = Int32(clamping: bytes.count)
        self.fields = fields.map { field in
            let ok = field.nameStart >= 0 && field.nameStart <= field.nameEnd && field.nameEnd <= limit
                && field.valueStart >= 0 && field.valueStart <= field.valueEnd && field.valueEnd <= limit
            return ok ? field : HTTPHeaderField(nameStart: 0, nameEnd: 0, valueStart: 0, valueEnd: 0)
        }
    }

    /// Trusted initializer for the parsers, whose ranges are valid by construction (no re-check, no copy).
    init(validatedBytes bytes: [UInt8], fields: [HTTPHeaderField]) {
        self.bytes = bytes
        self.fields = fields
    }

    /// Empty headers.
    public init() {
        self.bytes = []
        self.fields = []
    }

    /// Number of field lines.
    public var count: Int { fields.count }

    /// Whether there are no field lines.
    public var isEmpty: Bool { fields.isEmpty }

    /// Calls `body` with the raw name bytes (as received, any case) of field `index`.
    public func withNameBytes<R>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let field = fields[index]
        return try bytes.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[Int(field.nameStart)..<Int(field.nameEnd)]))
        }
    }

    /// Calls `body` with the raw, OWS-trimmed value bytes of field `index`.
    public func withValueBytes<R>(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let field = fields[index]
        return try bytes.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[Int(field.valueStart)..<Int(field.valueEnd)]))
        }
    }

    /// The raw, OWS-trimmed value bytes of field `index`, sharing `bytes`' storage (no copy).
    public func valueSlice(at index: Int) -> ArraySlice<UInt8> {
        let field = fields[index]
        return bytes[Int(field.valueStart)..<Int(field.valueEnd)]
    }

    /// Calls `body` for every field, in order, with its index, raw name and trimmed raw value.
    /// The cheap way to iterate: nothing is allocated.
    public func forEachField(
        _ body: (_ index: Int, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void
    ) rethrows {
        try bytes.withUnsafeBytes { raw in
            for (index, field) in fields.enumerated() {
                try body(index,
                         UnsafeRawBufferPointer(rebasing: raw[Int(field.nameStart)..<Int(field.nameEnd)]),
                         UnsafeRawBufferPointer(rebasing: raw[Int(field.valueStart)..<Int(field.valueEnd)]))
            }
        }
    }

    /// The name of field `index` as received (case preserved).
    public func name(at index: Int) -> String {
        withNameBytes(at: index) { String(decoding: $0, as: UTF8.self) }
    }

    /// The name of field `index`, lower-cased (ASCII).
    public func lowercasedName(at index: Int) -> String {
        withNameBytes(at: index) { String(decoding: $0.lazy.map(HTTPSyntax.lowercased), as: UTF8.self) }
    }

    /// The OWS-trimmed value of field `index`. Bytes that are not UTF-8 (obs-text) become U+FFFD; use
    /// `withValueBytes(at:_:)` to forward values byte-exact.
    public func value(at index: Int) -> String {
        withValueBytes(at: index) { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether the name of field `index` equals `lowercaseASCII`, ignoring ASCII case of the field name.
    /// `lowercaseASCII` must be lower case. Does not allocate.
    public func nameEquals(at index: Int, _ lowercaseASCII: String) -> Bool {
        withNameBytes(at: index) { HTTPSyntax.equalsLowercased($0, string: lowercaseASCII) }
    }

    /// Index of the first field after `after` named `lowercaseLiteral` (case-insensitive), or `nil`. Compares the
    /// literal's bytes in place: the request path looks fields up with this.
    public func firstIndex(ofLiteral lowercaseLiteral: StaticString, after: Int = -1) -> Int? {
        let long = lowercaseLiteral.utf8CodeUnitCount >= 16
        return bytes.withUnsafeBytes { raw -> Int? in
            var index = after + 1
            while index < fields.count {
                let f = fields[index]
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                if long ? HTTPSyntax.equalsLowercasedByWords(name, lowercaseLiteral)
                    : HTTPSyntax.equalsLowercased(name, lowercaseLiteral) { return index }
                index += 1
            }
            return nil
        }
    }

    /// Index of the first field named `lowercaseASCII` (case-insensitive), or `nil`.
    public func firstIndex(forLowercased lowercaseASCII: String) -> Int? {
        for index in fields.indices where nameEquals(at: index, lowercaseASCII) { return index }
        return nil
    }

    /// Value of the first field named `lowercaseASCII` (case-insensitive), or `nil`.
    public func firstValue(forLowercased lowercaseASCII: String) -> String? {
        firstIndex(forLowercased: lowercaseASCII).map { value(at: $0) }
    }

    /// Indices of all fields named `lowercaseASCII` (case-insensitive), in order.
    public func indices(forLowercased lowercaseASCII: String) -> [Int] {
        fields.indices.filter { nameEquals(at: $0, lowercaseASCII) }
    }

    /// Whether a field named `lowercaseASCII` (case-insensitive) is present.
    public func contains(lowercased lowercaseASCII: String) -> Bool {
        firstIndex(forLowercased: lowercaseASCII) != nil
    }

    /// Calls `body` for each element of the comma-separated list value of field `index`
    /// (`#rule`, RFC 9110 §5.6.1), OWS-trimmed; empty elements are skipped as the RFC requires.
    /// Quoted strings are not interpreted: use only for lists of tokens. `body` returns `false` to stop.
    public func forEachListElement(at index: Int, _ body: (UnsafeRawBufferPointer) throws -> Bool) rethrows {
        try withValueBytes(at: index) { value in
            try HTTPHeaders.forEachListElement(value, body)
        }
    }

    static func forEachListElement(
        _ value: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> Bool
    ) rethrows {
        var start = 0
        var position = 0
        let count = value.count
        while position <= count {
            if position == count || value[position] == UInt8(ascii: ",") {
                let (lower, upper) = HTTPSyntax.trimOWS(value, start, position)
                if lower < upper {
                    guard try body(UnsafeRawBufferPointer(rebasing: value[lower..<upper])) else { return }
                }
                start = position + 1
            }
            position += 1
        }
    }
}
