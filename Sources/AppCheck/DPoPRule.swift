/// The rule of RFC 9449 §4.3 a DPoP proof failed (SPEC §4.4), as the gateway's log line and the issuer's `rule` name
/// it. The raw value is the wire name. `malformed` is the one rule the SPEC's list leaves implicit (RFC 9449 §4.3
/// check 2, "a well-formed JWT"): not a compact JWS of strict base64url JSON objects, longer than
/// `DPoPProof.maxLength`, a `crit` header, or the `DPoP` header sent more than once.
public enum DPoPRule: String, Error, Sendable, CaseIterable, Hashable {
    case malformed = "malformed"
    /// `typ` missing or not exactly `dpop+jwt` (RFC 9449 §4.2).
    case typ = "typ"
    /// `alg` missing or not `ES256`, `ES384` or `EdDSA`: never `none`, a MAC (HS*) or RSA.
    case alg = "alg"
    /// `jwk` missing, not a public EC P-256/P-384 or OKP Ed25519 key fitting `alg`, or carrying a private member (`d`).
    case jwk = "jwk"
    /// The RFC 7638 thumbprint of `jwk` is not the token's `cnf.jkt`.
    case thumbprint = "thumbprint"
    /// The signature does not verify with `jwk`.
    case signature = "signature"
    /// `htm` missing or not the request's method.
    case htm = "htm"
    /// `htu` missing, carrying a query or fragment, or not the request's scheme, host and path.
    case htu = "htu"
    /// `iat` missing, not a number, older than the allowed age or later than now (each ± the clock skew).
    case iat = "iat"
    /// `ath` missing or not base64url(SHA-256(token)).
    case ath = "ath"
    /// `jti` missing, not a string, or not 1–128 characters.
    case jti = "jti"
}
