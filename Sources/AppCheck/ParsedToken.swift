/// A token that passed docs/behaviour.md checks 2 and 3: its structure and header are acceptable.
///
/// Its signature is not verified yet: nothing in `claims` may be trusted before
/// `AppCheckVerifier.verifySignature` returns `nil`.
public struct ParsedToken: Sendable {
    /// The whole token text as bytes; shares storage with the caller's array (no copy).
    public let token: [UInt8]
    /// The header's `kid`: a non-empty string.
    public let kid: String
    /// The decoded header (strict JSON, an object).
    let headerBytes: [UInt8]
    /// The decoded header object, parsed again from `headerBytes` on each read (the verification path never
    /// builds it).
    public var header: JSONValue { (try? StrictJSON.parse(headerBytes)) ?? .object([]) }
    /// The decoded payload, not yet trusted.
    public let claims: TokenClaims
    /// The raw signature bytes (decoded from the third part).
    public let signature: [UInt8]
    /// Where the JWS signing input (`header.payload`, RFC 7515 §5.2) lies in `token`.
    public let signingInputRange: Range<Int>

    /// The JWS signing input, a slice of `token`.
    public var signingInput: ArraySlice<UInt8> { token[signingInputRange] }
}
