/// Why `DERReader` or the `KeyDescription` parser refused its input, and the byte offset where it noticed.
public struct DERError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kinds of refusal; each names one rule of DER (X.690 §8, §10) or of the KeyDescription schema.
    public enum Kind: String, Sendable, Equatable {
        /// The input ends inside an element: more bytes could still make it valid.
        case truncated
        /// Bytes follow the single top-level element, or an element's contents hold more than the schema allows.
        case trailingBytes
        /// The indefinite length form (0x80), which DER forbids (X.690 §10.1).
        case indefiniteLength
        /// A length or tag number written with more bytes than needed (X.690 §10.1, §8.1.2.4.2).
        case nonMinimalEncoding
        /// A tag number above `DERLimits.maxTagNumber`, or a length wider than four bytes.
        case tagTooLarge
        /// Constructed elements nested deeper than `DERLimits.maxDepth`.
        case tooDeep
        /// The input, or a declared length, exceeds `DERLimits.maxBytes`.
        case tooLarge
        /// An element whose tag is not the one the schema expects at that place.
        case unexpectedTag
        /// An INTEGER or ENUMERATED that is empty, not minimal (X.690 §8.3.2), or outside the `Int64` range.
        case invalidInteger
        /// A BOOLEAN whose contents are not one byte 0x00 or 0xFF (X.690 §11.1).
        case invalidBoolean
        /// A NULL with contents.
        case invalidNull
        /// AuthorizationList tags out of ascending order or repeated (X.690 §10.3 for a SEQUENCE's tagged members).
        case unorderedTags
        /// A value the schema does not define (an unknown security level or boot state).
        case invalidValue
    }

    /// Which rule was broken.
    public let kind: Kind
    /// Offset into the input of the element (or byte) that broke it.
    public let offset: Int

    /// Makes an error of `kind` at `offset`.
    public init(_ kind: Kind, at offset: Int) {
        self.kind = kind
        self.offset = offset
    }

    /// `"<kind> at byte <offset>"`.
    public var description: String { "\(kind.rawValue) at byte \(offset)" }
}
