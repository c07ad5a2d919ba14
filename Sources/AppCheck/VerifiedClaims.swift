/// The claims of a token that passed docs/behaviour.md checks 2–6.
public struct VerifiedClaims: Sendable, Equatable {
    /// The App ID (`sub`).
    public let appId: String
    /// Expiry, seconds since the Unix epoch (`exp`).
    public let expiresAt: Double
    /// Issue time, seconds since the Unix epoch (`iat`).
    public let issuedAt: Double
    /// The token id (`jti`), when present.
    public let jti: String?
    /// The audiences (`aud`), every one a string, as the token's parse left them (no array of Strings is built
    /// per token: `audiences` reads them).
    let audienceValues: [JSONValue]
    /// The audiences (`aud`).
    public var audiences: [String] { audienceValues.compactMap(\.stringValue) }
    /// SHA-256(signing input + "." + raw signature bytes) for a token without `jti` (computed at parse, when the
    /// token's bytes are at hand); nil for one with a `jti`.
    let signatureReplayKey: SHA256Digest.Value?
    /// The replay key (docs/behaviour.md, replay protection), 32 bytes: SHA-256(sub + "\n" + jti) when the token has a `jti`, else
    /// SHA-256(signing input + "." + raw signature bytes). Never derived from the raw token text, so a
    /// re-encoded token cannot slip past. Computed on each read for a token with a `jti` (two SHA-256 blocks): read it
    /// once. A store whose keys never leave the process (memory) keys a token with a `jti` on `appId` and `jti`
    /// itself (`ReplayClient.consumeNow(sub:jti:expiresAt:issuedAt:now:)`) and never reads it.
    public var replayKey: SHA256Digest.Value {
        if let signatureReplayKey { return signatureReplayKey }
        return TokenClaims.jtiReplayKey(sub: appId, jti: jti ?? "")
    }
    /// The `provider` claim of the gateway's own issuer (`app_attest`, `device_check`, `debug`, `custom`);
    /// nil when absent, as in Firebase's tokens.
    public var provider: String? = nil
    /// The `risk` claim of the gateway's own App Attest tokens (Apple's risk metric), as the route step judges it.
    public var risk: RiskClaim = .absent
    /// `cnf.jkt` of a token bound to a key (SPEC §4.4): the RFC 7638 thumbprint a DPoP proof's key must have; nil for
    /// a bearer token (every token Firebase mints).
    public var boundThumbprint: String? = nil

    /// `exp - iat`, the lifetime the issuer gave the token.
    public var lifetime: Double { expiresAt - issuedAt }
}

/// The `risk` claim of a token (docs/behaviour.md step 7): absent, a whole number from 0 to 2^53, or anything else
/// (`invalid`: a string, a fraction, a negative number), which a route with `max_risk` refuses as `malformed`.
public enum RiskClaim: Sendable, Equatable {
    case absent
    case invalid
    case value(Int)

    init(_ claim: TokenClaims.Claim<Double>) {
        switch claim {
        case .absent: self = .absent
        case .wrongType: self = .invalid
        case .value(let number):
            self = number >= 0 && number <= 9_007_199_254_740_992 && number == number.rounded() ? .value(Int(number)) : .invalid
        }
    }
}
