import ProxyCore
import Foundation
import AppCheck
import GatewayConfig
import HTTPWire
import ReplayStores

/// What the DPoP check (SPEC §4.4) reads of a request beyond its token: the head (the `DPoP` field, method, target,
/// `Host`), where the token lies in it (for `ath`), and how the client reached the gateway (for `htu`'s scheme).
struct DPoPInput {
    let head: HTTPRequestHead
    /// The index of the `X-Firebase-AppCheck` field in `head.headers`.
    let tokenIndex: Int
    /// `http` or `https`: the listener's scheme.
    let scheme: String
    /// The client is a trusted proxy: its `X-Forwarded-Proto` names the scheme the client used.
    let peerTrusted: Bool
    /// The token's key in the loop's token cache (nil on replay routes, whose tokens are not cached): where the
    /// token's `ath` is kept once computed.
    var cacheKey: TokenCache.Key? = nil
    /// The token's `ath` as its cache entry kept it (a hit on a bound token after its first proof); nil: hash the token.
    var ath: String? = nil

    /// The scheme the client used: the first `X-Forwarded-Proto` element of a trusted proxy when it says `http` or
    /// `https`, else the listener's.
    var clientScheme: String {
        guard peerTrusted, let forwarded = head.headers.firstValue(forLowercased: "x-forwarded-proto") else { return scheme }
        let first = forwarded.split(separator: ",", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return first == "http" || first == "https" ? first! : scheme
    }

    /// The request as the proof must name it: the target's authority (absolute form) or `Host` / `:authority`, the
    /// path as sent (without query and fragment).
    /// The token's `ath` (`ath`, or computed from the token's bytes).
    func request(thumbprint: String, ath: String, maxAge: Double, clockSkew: Double) -> DPoPRequest {
        // The target as sent: `DPoPRequest` takes its path (and an absolute form's authority) from its bytes when it
        // compares `htu`, so no path String is made per request.
        DPoPRequest(method: head.method, scheme: clientScheme, host: head.headers.firstValue(forLowercased: "host") ?? "",
                    target: head.target, thumbprint: thumbprint, maxAge: maxAge, clockSkew: clockSkew,
                    accessTokenHash: ath)
    }
}

extension AppCheckStep {
    /// The check of SPEC §4.4, after step 7 and before step 8 of §4.2, for a token that is bound (`cnf.jkt`) or on a
    /// `dpop: required` route: exactly one `DPoP` field holding a proof that passes `DPoPVerifier` for this request,
    /// whose `jti` is then consumed in the replay store (its own key domain, `DPoPVerifiedProof.replayKey`). Refusals:
    /// `dpop_unbound`, `dpop_missing`, `dpop_invalid` (the log names the rule), `dpop_reused`; a store that cannot
    /// answer is `503 replay_store_unavailable`, fail closed. On success, `next` runs (step 8).
    func checkProof(_ verified: VerifiedClaims, input: DPoPInput, policy: AppCheckPolicy, now: Double,
                    fingerprint: String?, route: StepRoute, completion: @escaping (consuming AppCheckDecision) -> Void,
                    next: @escaping () -> Void) {
        let appId = verified.appId
        guard let thumbprint = verified.boundThumbprint else {
            return completion(refuseProof(route, "dpop_unbound", rule: nil, fingerprint: fingerprint, appId: appId))
        }
        let headers = input.head.headers
        guard let index = headers.firstIndex(ofLiteral: "dpop") else {
            return completion(refuseProof(route, "dpop_missing", rule: nil, fingerprint: fingerprint, appId: appId))
        }
        if headers.firstIndex(ofLiteral: "dpop", after: index) != nil {
            return completion(refuseProof(route, "dpop_invalid", rule: .malformed, fingerprint: fingerprint, appId: appId))
        }
        // The token's `ath`: kept in its cache entry after its first proof, so a cached token is hashed once.
        let ath: String
        if let known = input.ath {
            ath = known
        } else {
            ath = DPoPRequest.ath(of: headers.valueSlice(at: input.tokenIndex))
            if let key = input.cacheKey { cache.setATH(key, ath) }
        }
        let request = input.request(thumbprint: thumbprint, ath: ath, maxAge: route.dpopMaxAge, clockSkew: policy.clockSkew)
        let proof: DPoPVerifiedProof
        switch DPoPVerifier.verify(headers.valueSlice(at: index), request: request, now: now) {
        case .success(let p): proof = p
        case .failure(let rule):
            return completion(refuseProof(route, "dpop_invalid", rule: rule, fingerprint: fingerprint, appId: appId))
        }
        guard let replay = replayClient else {
            return completion(storeUnavailable(AppCheckOutcome(status: .verified, outcome: .verified, appId: appId,
                                                               tokenSHA256: fingerprint)))
        }
        let key = proof.replayKey
        // A store that lost its memory (SPEC §5) refuses proofs made before it came back, by their `iat` plus one
        // second (clients write whole seconds, rounded down). Unlike limited-use tokens, `clock_skew` is not taken
        // off: that would refuse every bound request for `clock_skew` after each start. The price: a proof consumed
        // just before a loss, from a client whose clock runs ahead, may be accepted once more within its `iat` window
        // (docs/dpop.md).
        let issuedAt = proof.issuedAt + 1
        // The memory store answers at once: no closure is made for it (one allocation and its captures per request).
        if let result = replay.consumeNow(key: ReplayKey(words: key.words), expiresAt: proof.rememberUntil, issuedAt: issuedAt,
                                          now: now) {
            return decideProof(result, route: route, fingerprint: fingerprint, appId: appId, completion: completion,
                               next: next)
        }
        replay.consume(key: key.bytes, expiresAt: proof.rememberUntil, issuedAt: issuedAt) { [weak self] result in
            self?.decideProof(result, route: route, fingerprint: fingerprint, appId: appId, completion: completion,
                              next: next)
        }
    }

    /// What the replay store's answer on a proof's `jti` decides: `next` (step 8) when consumed, `dpop_reused`, or
    /// `503 replay_store_unavailable`.
    private func decideProof(_ result: ReplayResult, route: StepRoute, fingerprint: String?, appId: String,
                             completion: (consuming AppCheckDecision) -> Void, next: () -> Void) {
        switch result {
        case .consumed: next()
        case .reused:
            completion(refuseProof(route, "dpop_reused", rule: nil, fingerprint: fingerprint, appId: appId))
        case .unavailable:
            completion(storeUnavailable(AppCheckOutcome(status: .verified, outcome: .verified, appId: appId,
                                                        tokenSHA256: fingerprint)))
        }
    }

    /// A DPoP refusal: `401 app_check_token_invalid` with `WWW-Authenticate: DPoP error="invalid_dpop_proof"` (RFC 9449
    /// §7.1) on an enforce route; forwarded with `X-AppCheck-Status: invalid` and the reason on a monitor route.
    func refuseProof(_ route: StepRoute, _ reason: String, rule: DPoPRule?, fingerprint: String?,
                     appId: String) -> AppCheckDecision {
        var outcome = AppCheckOutcome(status: .invalid, outcome: .invalid, reason: reason)
        outcome.tokenSHA256 = fingerprint
        outcome.appId = appId
        outcome.dpopRule = rule?.rawValue
        if route.enforcement == .monitor { return AppCheckDecision(outcome: outcome) }
        return AppCheckDecision(outcome: outcome, rejection: Rejection(
            status: 401, code: "app_check_token_invalid", reason: reason, dpopChallenge: true))
    }
}
