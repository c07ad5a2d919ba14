/// The App Check verification pipeline of docs/behaviour.md, split so a verified-token cache can skip the RSA work
/// and still run the time checks on every hit:
///
/// 1. `AppCheckToken.parse` (steps 2–3),
/// 2. `verifySignature` (steps 4–5; the gateway owns the unknown-`kid` refetch),
/// 3. `checkClaims` (step 6), on every request including cache hits,
/// 4. `checkProvider` (step 7) on routes that list `providers`, and `checkRisk` on routes with `max_risk`,
/// 5. `checkLimitedUse` (step 8, first half) on replay-protected routes, before the gateway consumes
///    `VerifiedClaims.replayKey`.
///
/// Pure: the time is an argument (`now`, seconds since the Unix epoch); no I/O, no logging, no global state.
public enum AppCheckVerifier {
    /// Steps 4–5: `unknownKid` when `keys` has no key for the token's `kid`, `badSignature` when the RS256
    /// signature does not verify with exactly that key, `nil` when it does. Never tries another key.
    public static func verifySignature(_ parsed: ParsedToken, keys: JWKSet) -> AppCheckReason? {
        guard let key = keys.key(for: parsed.kid) else { return .unknownKid }
        guard key.verifyRS256(signingInput: parsed.signingInput, signature: parsed.signature) else { return .badSignature }
        return nil
    }

    /// Step 6. The checks run in the order of docs/behaviour.md ("Checks, in order") and the first failure is the reason:
    ///
    /// 1. `iss` a string (else `malformed`) equal byte for byte to `policy.issuer` (else `wrongIssuer`);
    /// 2. `aud` an array (else `malformed`) whose string members include every `policy.requiredAudiences`
    ///    entry (else `wrongAudience`);
    /// 3. `sub` a string of 1–1,024 printable ASCII characters without spaces, 0x21–0x7E (else `malformed`:
    ///    the gateway copies it into the `X-AppCheck-App-Id` request header, so no claim may carry CR, LF,
    ///    NUL or anything else that could split or bend a request), allowed by `policy.appIds` (else
    ///    `appNotAllowed`);
    /// 4. `exp` and `iat` present numbers (else `malformed`);
    /// 5. `now < exp + clockSkew` (else `expired`; `now == exp + clockSkew` is expired);
    /// 6. `iat <= now + clockSkew` (else `issuedInFuture`);
    /// 7. `exp - iat <= maxLifetime` (else `lifetimeTooLong`; exactly 7 days passes);
    /// 8. `nbf`, when present, a number (else `malformed`) `<= now + clockSkew` (else `issuedInFuture`);
    /// 9. `jti`, when present, a non-empty string (else `malformed`); `provider`, when present, likewise; `cnf`,
    ///    when present, an object with a non-empty string `jkt` (else `malformed`);
    /// 10. every `aud` member a string (else `malformed`) — last, as docs/behaviour.md lists it.
    ///
    /// A claim that is missing or of the wrong JSON type is `malformed` at its own position in this order.
    public static func checkClaims(_ claims: TokenClaims, policy: AppCheckPolicy, now: Double) -> Result<VerifiedClaims, AppCheckReason> {
        do { return .success(try verifiedClaims(claims, policy: policy, now: now)) } catch { return .failure(error) }
    }

    /// `checkClaims` that returns the claims themselves and throws the reason: the caller owns the value returned (a
    /// `Result` switched on was copied, its strings retained and released once more).
    public static func verifiedClaims(_ claims: TokenClaims, policy: AppCheckPolicy,
                                      now: Double) throws(AppCheckReason) -> VerifiedClaims {
        // String claims are read through `value` (a borrow of the stored enum, then the string alone): a `case .value`
        // pattern copied the whole enum first, through its value witness (some 50 instructions a claim, every token).
        guard let iss = claims.iss.value else { throw .malformed }
        guard utf8Equal(iss, policy.issuer) else { throw .wrongIssuer }

        guard case .value(let audMembers) = claims.aud else { throw .malformed }
        for required in policy.requiredAudiences
        where !audMembers.contains(where: { if case .string(let member) = $0 { utf8Equal(member, required) } else { false } }) {
            throw .wrongAudience
        }

        guard let sub = claims.sub.value, claims.subIsHeaderSafe else { throw .malformed }
        guard policy.allows(appId: sub) else { throw .appNotAllowed }

        guard case .value(let exp) = claims.exp, case .value(let iat) = claims.iat else { throw .malformed }
        guard now < exp + policy.clockSkew else { throw .expired }
        guard iat <= now + policy.clockSkew else { throw .issuedInFuture }
        guard exp - iat <= policy.maxLifetime else { throw .lifetimeTooLong }

        switch claims.nbf {
        case .absent: break
        case .wrongType: throw .malformed
        case .value(let nbf): guard nbf <= now + policy.clockSkew else { throw .issuedInFuture }
        }

        let jti = claims.jti.value
        if jti?.isEmpty ?? claims.jti.isWrongType { throw .malformed }

        let provider = claims.provider.value
        if provider?.isEmpty ?? claims.provider.isWrongType { throw .malformed }

        // SPEC §4.4: a bound token names its key's thumbprint; a `cnf` this gateway cannot check is no binding to
        // ignore (the issuer meant the token for one key only), so it is refused.
        var boundThumbprint: String? = nil
        switch claims.cnf {
        case .absent: break
        case .wrongType: throw .malformed
        case .value(let cnf):
            guard let jkt = cnf.member("jkt")?.stringValue, !jkt.isEmpty else { throw .malformed }
            boundThumbprint = jkt
        }

        guard claims.audAllStrings, case .value(let audiences) = claims.aud else { throw .malformed }  // a member not a string

        // The replay key of a token with a jti is computed from sub and jti when a store asks for it
        // (`VerifiedClaims.replayKey`); one without carries the signature key, which needs the token's bytes.
        let signatureReplayKey = jti == nil ? claims.signatureReplayKey : nil
        // TokenClaims always carries the signature key when the payload has no jti member.
        if jti == nil && signatureReplayKey == nil { throw .malformed }
        // Built in place as the return value (no copy of a mutable local).
        return VerifiedClaims(appId: sub, expiresAt: exp, issuedAt: iat, jti: jti, audienceValues: audiences,
                              signatureReplayKey: signatureReplayKey, provider: provider,
                              risk: RiskClaim(claims.risk), boundThumbprint: boundThumbprint)
    }

    /// The longest `sub` accepted (docs/behaviour.md): Firebase App IDs are under 100 characters.
    public static let maxAppIdLength = 1024

    /// `sub` is 1–`maxAppIdLength` bytes, each 0x21–0x7E (printable ASCII, no space).
    static func isHeaderSafeAppId(_ sub: String) -> Bool {
        if let safe = sub.utf8.withContiguousStorageIfAvailable(isHeaderSafeAppId) { return safe }
        return Array(sub.utf8).withUnsafeBufferPointer { isHeaderSafeAppId($0) }
    }

    /// The bytes test of `isHeaderSafeAppId`: eight bytes a step (no byte below 0x21, none from 0x7F: the word tests of
    /// "has a byte less than n" and "has a byte of at least 0x7F"), the verdicts of all words ORed and judged once; the
    /// bytes after the last whole word as the eight bytes that end the ID (read again in part: a byte judged twice gets
    /// the same verdict), so no byte goes alone unless the ID is shorter than eight.
    static func isHeaderSafeAppId(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard utf8.count >= 1 && utf8.count <= maxAppIdLength, let base = utf8.baseAddress else { return false }
        let count = utf8.count
        if count < 8 {
            for i in 0..<count where utf8[i] < 0x21 || utf8[i] > 0x7E { return false }
            return true
        }
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        // The high bit of a byte is set for a byte below 0x21 (exact for "any byte": a borrow starts only at one), or a
        // byte of 0x7F or more (adding 1 to each 7-bit part carries into the high bit exactly from 0x7F; a byte with the
        // high bit set already is caught by `word` itself).
        @inline(__always) func flags(_ word: UInt64) -> UInt64 {
            ((word &- ones &* 0x21) & ~word) | ((word & ~highs) &+ ones) | word
        }
        let raw = UnsafeRawPointer(base)
        var found: UInt64 = 0
        var i = 0
        while i &+ 8 <= count {
            found |= flags(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            i &+= 8
        }
        if i < count { found |= flags(raw.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)) }
        return found & highs == 0
    }

    /// Step 7 (docs/behaviour.md): when the route lists `providers`, the token's `provider` claim — `unspecified` when
    /// absent — must be one of them, else `providerNotAllowed`. An empty set admits every token.
    public static func checkProvider(_ claims: VerifiedClaims, allowed: Set<String>) -> AppCheckReason? {
        guard !allowed.isEmpty else { return nil }
        return allowed.contains(claims.provider ?? "unspecified") ? nil : .providerNotAllowed
    }

    /// Step 7, second half (docs/behaviour.md): on a route with `max_risk`, the token's `risk` claim (App Attest's
    /// risk metric, in the gateway's own App Attest tokens) must be a whole number at most `maxRisk` (else
    /// `riskExceeded`; not a whole number ≥ 0: `malformed`); a token without it passes unless `requireRisk`
    /// (then `riskUnknown`). No `maxRisk` admits every token.
    public static func checkRisk(_ claims: VerifiedClaims, maxRisk: Int?, requireRisk: Bool) -> AppCheckReason? {
        guard let maxRisk else { return nil }
        switch claims.risk {
        case .absent: return requireRisk ? .riskUnknown : nil
        case .invalid: return .malformed
        case .value(let risk): return risk <= maxRisk ? nil : .riskExceeded
        }
    }

    /// Step 8, first half: on a replay-protected route the token must be a limited-use token,
    /// `exp - iat <= policy.limitedUseMaxTTL`, else `limitedUseRequired`. `nil` when it is.
    public static func checkLimitedUse(_ claims: VerifiedClaims, policy: AppCheckPolicy) -> AppCheckReason? {
        claims.lifetime <= policy.limitedUseMaxTTL ? nil : .limitedUseRequired
    }

    /// Steps 2–6 (and step 8's lifetime check when `limitedUse`), uncached. Consuming the replay key is the
    /// gateway's.
    public static func verify(token: [UInt8], keys: JWKSet, policy: AppCheckPolicy, now: Double,
                              limitedUse: Bool = false) -> Result<VerifiedClaims, AppCheckReason> {
        let parsed: ParsedToken
        switch AppCheckToken.parse(token) {
        case .success(let value): parsed = value
        case .failure(let reason): return .failure(reason)
        }
        if let reason = verifySignature(parsed, keys: keys) { return .failure(reason) }
        let result = checkClaims(parsed.claims, policy: policy, now: now)
        if limitedUse, case .success(let claims) = result, let reason = checkLimitedUse(claims, policy: policy) {
            return .failure(reason)
        }
        return result
    }

    /// `verify(token:keys:policy:now:limitedUse:)` on the UTF-8 of `token`.
    public static func verify(token: String, keys: JWKSet, policy: AppCheckPolicy, now: Double,
                              limitedUse: Bool = false) -> Result<VerifiedClaims, AppCheckReason> {
        verify(token: Array(token.utf8), keys: keys, policy: policy, now: now, limitedUse: limitedUse)
    }

    /// SHA-256 of the whole token text: the verified-token cache key (docs/behaviour.md, key set).
    public static func tokenHash(_ token: [UInt8]) -> [UInt8] {
        SHA256Digest.hash(token)
    }

    /// SHA-256 of the UTF-8 of `token`.
    public static func tokenHash(_ token: String) -> [UInt8] {
        SHA256Digest.hash(Array(token.utf8))
    }

    /// The `token_sha256` log field (docs/operations.md): the first 16 hex characters of `tokenHash`.
    public static func logFingerprint<Token: Collection>(_ token: Token) -> String where Token.Element == UInt8 {
        String(SHA256Digest.hex(SHA256Digest.hash(token)).prefix(16))
    }
}
