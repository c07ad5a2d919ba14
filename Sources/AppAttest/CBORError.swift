/// Why `CBORDecoder` refused its input, and the byte offset where it noticed.
public struct CBORError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of refusal; each names one rule of the strict subset.
    public enum Kind: String, Sendable, Equatable {
        /// The input ends inside an item: more bytes could still make it valid.
        case truncated
        /// Bytes follow the single top-level item.
        case trailingBytes
        /// An indefinite-length string, array or map (additional information 31).
        case indefiniteLength
        /// Major type 6 (tags) or 7 (simple values, floats, `break`): outside the App Attest subset.
        case unsupportedType
        /// Additional information 28, 29 or 30 (reserved by RFC 8949 §3).
        case reservedAdditionalInfo
        /// An integer or length written with more bytes than needed (RFC 8949 §4.2.1 preferred encoding).
        case nonMinimalEncoding
        /// Arrays and maps nested deeper than `CBORLimits.maxDepth`.
        case tooDeep
        /// More items in total than `CBORLimits.maxItems`.
        case tooManyItems
        /// The input, or a declared length, exceeds `CBORLimits.maxBytes`.
        case tooLarge
        /// A text string that is not valid UTF-8.
        case invalidUTF8
        /// A map key that is neither a text string nor an integer in the `Int64` range.
        case unsupportedKey
        /// The same key twice in one map.
        case duplicateKey
    }

    /// Which rule was broken.
    public let kind: Kind
    /// Offset into the input of the item (or byte) that broke it.
    public let offset: Int

    /// Makes an error of `kind` at `offset`.
    public init(_ kind: Kind, at offset: Int) {
        self.kind = kind
        self.offset = offset
    }

    /// `"<kind> at byte <offset>"`.
    public var description: String { "\(kind.rawValue) at byte \(offset)" }
}
