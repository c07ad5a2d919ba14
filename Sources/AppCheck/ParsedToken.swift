/// A token that passed docs/behaviour.md checks 2 and 3: its structure and header are acceptable.
///
/// Its signature is not verified yet: nothing in `claims` may be trusted before
/// `AppCheckVerifier.verifySignature` returns `nil`.
public struct ParsedToken: Sendable {
    /// The whole token text as bytes; shares storage with the caller's array (no copy).
    public let token: [UInt8]
    /// The header's `kid`: a non-empty string.
    public let kid: String
    /// Where the first dot is in `token` (the header is before it, the payload after it).
    let firstDot: Int
    /// The decoded header object, decoded and parsed again from `token` on each read (the verification path never
    /// builds it).
    public var header: JSONValue { Self.object(token[0..<firstDot]) }
    /// The decoded payload object, not yet trusted; decoded and parsed again from `token` on each read (the
    /// verification path never builds it: `claims` holds what the checks read).
    public var payload: JSONValue { Self.object(token[(firstDot + 1)..<signingInputRange.upperBound]) }
    /// The claims the checks read, decoded from the payload, not yet trusted.
    public let claims: TokenClaims
    /// The raw signature bytes (decoded from the third part).
    public let signature: [UInt8]
    /// Where the JWS signing input (`header.payload`, RFC 7515 §5.2) lies in `token`.
    public let signingInputRange: Range<Int>

    /// The JWS signing input, a slice of `token`.
    public var signingInput: ArraySlice<UInt8> { token[signingInputRange] }

    /// A part that `AppCheckToken.parse` accepted (strict base64url of a strict JSON object), as a JSON value.
    private static func object(_ part: ArraySlice<UInt8>) -> JSONValue {
        Base64URL.decode(part).flatMap { try? StrictJSON.parse($0) } ?? .object([])
    }
}
