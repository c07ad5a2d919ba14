/// Checks 2 and 3 of docs/behaviour.md: splitting and decoding a compact JWS (RFC 7515 §7.1) and judging its header.
///
/// Only the header is interpreted here; the payload is decoded (it must be a JSON object without duplicate
/// keys, as step 2 requires) but its claims are judged only after the signature check.
public enum AppCheckToken {
    /// Largest accepted token, in bytes (docs/behaviour.md check 1: 4 KiB). The gateway enforces it on the header;
    /// `parse` enforces it again so the parser is bounded on its own.
    public static let maxLength = 4096

    /// The only accepted `alg` (RFC 7518 §3.3). Fixed: the token never chooses the algorithm.
    public static let algorithm = "RS256"

    /// The only accepted `typ`.
    public static let type = "JWT"

    /// Header parameters whose mere presence is `malformed`: this verifier never honours them
    /// (RFC 7515 §4.1.2–4.1.6 and §4.1.11: keys or certificates supplied by the token, critical extensions;
    /// RFC 7797 `b64`, an unencoded payload, which Firebase's Admin SDK refuses too).
    public static let forbiddenHeaders = ["crit", "jku", "x5u", "jwk", "x5c", "b64"]

    static let algKey = JSONValue.ShortKey("alg")!
    static let typKey = JSONValue.ShortKey("typ")!
    static let kidKey = JSONValue.ShortKey("kid")!
    static let forbiddenKeys = Set(forbiddenHeaders.map { JSONValue.ShortKey($0)! })

    /// Parses `token` (the header value, UTF-8).
    ///
    /// Order, first failure wins: empty → `missing`; longer than `maxLength` → `tooLarge`; not exactly three
    /// dot-separated parts, a part that is not strict base64url (`Base64URL`), header or payload not a JSON
    /// object, or not strict JSON (`StrictJSON`: duplicate keys, bad UTF-8, …) → `malformed`; then the header:
    /// `alg` missing or not exactly `RS256` → `unsupportedAlgorithm`; `typ` missing or not exactly `JWT` →
    /// `wrongType`; `kid` missing, not a string or empty → `malformed`; any of `forbiddenHeaders` present →
    /// `malformed`. An empty signature part is structurally fine and fails later as `badSignature`.
    public static func parse(_ token: [UInt8]) -> Result<ParsedToken, AppCheckReason> {
        if token.isEmpty { return .failure(.missing) }
        if token.count > maxLength { return .failure(.tooLarge) }

        guard let jws = CompactJWS.decode(token, maxJSONBytes: maxLength) else { return .failure(.malformed) }
        let header = jws.header, payload = jws.payload, signature = jws.signature

        // One pass over the header's members (keys are unique): alg, typ, kid and the forbidden ones.
        var alg: JSONValue?, typ: JSONValue?, kidValue: JSONValue?, forbidden = false
        if case .object(let members) = header {
            for member in members {
                guard let short = JSONValue.ShortKey(member.key) else { continue }
                switch short {
                case Self.algKey: alg = member.value
                case Self.typKey: typ = member.value
                case Self.kidKey: kidValue = member.value
                default: if Self.forbiddenKeys.contains(short) { forbidden = true }
                }
            }
        }
        guard let alg, alg.stringEquals(algorithm) else { return .failure(.unsupportedAlgorithm) }
        guard let typ, typ.stringEquals(type) else { return .failure(.wrongType) }
        guard let kid = kidValue?.stringValue, !kid.isEmpty else { return .failure(.malformed) }
        if forbidden { return .failure(.malformed) }

        let signingInputRange = jws.signingInputRange
        let claims = TokenClaims(payload: payload) {
            var material = Array(token[signingInputRange])
            material.append(UInt8(ascii: "."))
            material.append(contentsOf: signature)
            return SHA256Digest.hash(material)
        }
        return .success(ParsedToken(token: token, kid: kid, header: header,
                                    claims: claims,
                                    signature: signature, signingInputRange: signingInputRange))
    }

    /// Parses the UTF-8 of `token`; see `parse(_:)` for `[UInt8]`.
    public static func parse(_ token: String) -> Result<ParsedToken, AppCheckReason> {
        parse(Array(token.utf8))
    }
}
