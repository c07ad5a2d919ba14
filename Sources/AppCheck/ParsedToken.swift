/// A token that passed docs/behaviour.md checks 2 and 3: its structure and header are acceptable.
///
/// Its signature is not verified yet: nothing in `claims` may be trusted before
/// `AppCheckVerifier.verifySignature` returns `nil`.
public struct ParsedToken: Sendable {
    /// The whole token text as bytes; shares storage with the caller's array (no copy: in the gateway, the request
    /// head's bytes). Its indices are the caller's; the offsets below count from its `startIndex` (read the signing
    /// input through `signingInput`, not `token[signingInputRange]`).
    public let token: ArraySlice<UInt8>
    /// The header's `kid`: a non-empty string.
    public let kid: String
    /// The offset of the first dot in `token` (the header is before it, the payload after it).
    let firstDot: Int
    /// The decoded header object, decoded and parsed again from `token` on each read (the verification path never
    /// builds it).
    public var header: JSONValue { Self.object(part(0..<firstDot)) }
    /// The decoded payload object, not yet trusted; decoded and parsed again from `token` on each read (the
    /// verification path never builds it: `claims` holds what the checks read).
    public var payload: JSONValue { Self.object(part((firstDot + 1)..<signingInputRange.upperBound)) }
    /// The claims the checks read, decoded from the payload, not yet trusted.
    public let claims: TokenClaims
    /// The raw signature bytes (decoded from the third part). Parsed with a memo, they share the memo's buffer,
    /// which the next parse reuses when this value is gone (copy on write keeps this value's bytes if it is not).
    public let signature: [UInt8]
    /// Where the JWS signing input (`header.payload`, RFC 7515 §5.2) lies in `token`: offsets from its start.
    public let signingInputRange: Range<Int>

    /// The JWS signing input, a slice of `token`.
    public var signingInput: ArraySlice<UInt8> { part(signingInputRange) }

    /// The bytes of `token` at `offsets` (counted from its start).
    private func part(_ offsets: Range<Int>) -> ArraySlice<UInt8> {
        token[(token.startIndex + offsets.lowerBound)..<(token.startIndex + offsets.upperBound)]
    }

    /// A part that `AppCheckToken.parse` accepted (strict base64url of a strict JSON object), as a JSON value.
    private static func object(_ part: ArraySlice<UInt8>) -> JSONValue {
        Base64URL.decode(part).flatMap { try? StrictJSON.parse($0) } ?? .object([])
    }
}
