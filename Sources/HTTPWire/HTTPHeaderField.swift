/// Where one field line lies inside `HTTPHeaders.bytes`: the name, and the value with its leading and
/// trailing OWS already removed (RFC 9112 §5.1). Offsets are byte indices into `bytes`, `end` exclusive.
public struct HTTPHeaderField: Hashable, Sendable {
    /// Index of the first byte of the field name.
    public var nameStart: Int32
    /// Index one past the last byte of the field name (the colon).
    public var nameEnd: Int32
    /// Index of the first byte of the trimmed value.
    public var valueStart: Int32
    /// Index one past the last byte of the trimmed value; equals `valueStart` for an empty value.
    public var valueEnd: Int32

    /// Creates a field range.
    public init(nameStart: Int32, nameEnd: Int32, valueStart: Int32, valueEnd: Int32) {
        self.nameStart = nameStart
        self.nameEnd = nameEnd
        self.valueStart = valueStart
        self.valueEnd = valueEnd
    }

    /// The same ranges moved `delta` bytes towards the start.
    func shifted(by delta: Int32) -> HTTPHeaderField {
        HTTPHeaderField(nameStart: nameStart - delta, nameEnd: nameEnd - delta,
                        valueStart: valueStart - delta, valueEnd: valueEnd - delta)
    }
}
