/// Why a token was refused, as named in docs/behaviour.md (used in logs, metrics and the `reason` field).
///
/// The raw value is the exact wire name. `missing`, `duplicateHeader`, `tooLarge` and `reused` are decided
/// by the gateway (step 1 and the replay store); the other reasons come out of this module.
public enum AppCheckReason: String, Error, Sendable, CaseIterable, Hashable {
    /// No token, or an empty header value.
    case missing = "missing"
    /// The token header was sent more than once.
    case duplicateHeader = "duplicate_header"
    /// The token is longer than `AppCheckToken.maxLength` bytes.
    case tooLarge = "too_large"
    /// Not a compact JWS of strict base64url JSON objects, a forbidden header, or a claim missing or of the
    /// wrong JSON type.
    case malformed = "malformed"
    /// `alg` is missing or is not exactly `RS256`.
    case unsupportedAlgorithm = "unsupported_algorithm"
    /// `typ` is missing or is not exactly `JWT`.
    case wrongType = "wrong_type"
    /// `kid` is not in the current key set.
    case unknownKid = "unknown_kid"
    /// The RSASSA-PKCS1-v1_5 SHA-256 signature does not verify.
    case badSignature = "bad_signature"
    /// `iss` is not the issuer of the key set the signing key came from (Firebase's
    /// `https://firebaseappcheck.googleapis.com/<project_number>`, or the gateway's own).
    case wrongIssuer = "wrong_issuer"
    /// `aud` lacks `projects/<project_number>` (or `projects/<project_id>` when configured).
    case wrongAudience = "wrong_audience"
    /// `sub` is not in the configured `app_ids`.
    case appNotAllowed = "app_not_allowed"
    /// `now >= exp + clock_skew`.
    case expired = "expired"
    /// `iat` or `nbf` is later than `now + clock_skew`.
    case issuedInFuture = "issued_in_future"
    /// `exp - iat` exceeds the maximum lifetime (7 days).
    case lifetimeTooLong = "lifetime_too_long"
    /// The route lists `providers` and the token's `provider` claim (`unspecified` when absent) is not one.
    case providerNotAllowed = "provider_not_allowed"
    /// The route sets `max_risk` and the token's `risk` claim (App Attest's risk metric) is above it.
    case riskExceeded = "risk_exceeded"
    /// The route sets `max_risk` with `require_risk: true` and the token has no `risk` claim.
    case riskUnknown = "risk_unknown"
    /// On a replay-protected route, the token lives longer than `limited_use_max_ttl`.
    case limitedUseRequired = "limited_use_required"
    /// The token was already consumed on a replay-protected route.
    case reused = "reused"
}
