import AppCheck

/// The checks of a custom token that need no network (docs/issuer.md, `exchangeCustomToken`): `decode` does steps 1–2
/// and reads `iss`; `check` does steps 4–7 against the key set of the backend `iss` names. `CustomTokenIssuers`
/// finds that backend and its keys between the two; the fuzz target `custom-token` drives both directly.
public enum CustomToken {
    /// A custom token past steps 1–2: a compact JWS whose `alg` is RS256 or ES256, with a `kid` and no `crit`.
    public struct Decoded: Sendable {
        public let token: [UInt8]
        public let jws: CompactJWS
        public let alg: String
        public let kid: String
        /// The `iss` claim, nil when absent or not a string (then no backend matches: `custom_token_issuer_unknown`).
        public let iss: String?
    }

    /// Largest custom token accepted, in bytes.
    public static let maxTokenBytes = 8 * 1024
    /// Largest `exp - iat`, in seconds.
    public static let maxLifetime = 300.0

    /// Steps 1–2: `custom_token_malformed`, `custom_token_algorithm` or `custom_token_crit`, else the decoded token.
    public static func decode(_ token: String) throws(IssuerError) -> Decoded {
        let bytes = Array(token.utf8)
        guard bytes.count <= maxTokenBytes else { throw malformed }
        guard let jws = CompactJWS.decode(bytes, maxJSONBytes: maxTokenBytes) else { throw malformed }
        guard let alg = jws.header.member("alg")?.stringValue, alg == "RS256" || alg == "ES256",
              let kid = jws.header.member("kid")?.stringValue else {
            throw .permissionDenied("custom_token_algorithm")
        }
        guard jws.header.member("crit") == nil else { throw .permissionDenied("custom_token_crit") }
        return Decoded(token: bytes, jws: jws, alg: alg, kid: kid, iss: jws.payload.member("iss")?.stringValue)
    }

    /// Steps 4–7 with `keys`, the set of the backend `decoded.iss` names (`custom_token_unknown_kid` when it has no key
    /// for `kid` and `alg`). Returns the time until which the token must be remembered as used, and the record that
    /// stands for it whatever its encoding: SHA-256 of the signing input and the decoded signature, an ES256 signature
    /// in its low-S form.
    public static func check(_ decoded: Decoded, keys: JWKSet, appId: String, audience: String, now: Double,
                             clockSkew: Double) throws(IssuerError) -> (rememberUntil: Double, usedRecord: [UInt8]) {
        let payload = decoded.jws.payload, signature = decoded.jws.signature
        let signingInput = decoded.token[decoded.jws.signingInputRange]
        let verified: Bool
        if decoded.alg == "RS256", let key = keys.key(for: decoded.kid) {
            verified = key.verifyRS256(signingInput: signingInput, signature: signature)
        } else if decoded.alg == "ES256", let key = keys.es256Key(for: decoded.kid) {
            verified = key.verifyES256(signingInput: signingInput, signature: signature)
        } else {
            throw .permissionDenied("custom_token_unknown_kid")
        }
        guard verified else { throw .permissionDenied("custom_token_bad_signature") }

        let aud = payload.member("aud")
        guard aud?.stringEquals(audience) == true || aud?.arrayValue?.contains(where: { $0.stringEquals(audience) }) == true else {
            throw .permissionDenied("custom_token_wrong_audience")
        }
        let app = payload.member("app_id") ?? payload.member("sub")
        guard app?.stringEquals(appId) == true else { throw .permissionDenied("custom_token_wrong_app") }
        guard let iat = payload.member("iat")?.numberValue, let exp = payload.member("exp")?.numberValue else { throw malformed }
        guard exp - iat <= maxLifetime else { throw .permissionDenied("custom_token_lifetime_too_long") }
        guard now < exp + clockSkew else { throw .permissionDenied("custom_token_expired") }
        guard iat <= now + clockSkew else { throw .permissionDenied("custom_token_issued_in_future") }
        let canonical = decoded.alg == "ES256" ? ES256Signature.lowS(signature) : signature
        return (exp + clockSkew, SHA256Digest.hash(Array(signingInput) + [0] + canonical))
    }

    static var malformed: IssuerError { .invalidArgument("custom_token_malformed", "The custom token is malformed.") }
}
