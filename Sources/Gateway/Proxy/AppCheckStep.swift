import ProxyCore
import AppCheck
import EventLoop
import Foundation
import GatewayConfig
import HTTPWire
import JSONLog
import ReplayStores

/// The outcome of the App Check step: what to forward and log, and the refusal when there is one.
struct AppCheckDecision {
    var outcome: AppCheckOutcome
    var rejection: Rejection?
}

/// What the App Check step reads of a request: its route, and the runtime that route belongs to (its App Check
/// policies, the outdated-client matcher). Both held: a reload may replace the loop's runtime while a request waits
/// for its answer, and the request is decided under the configuration it arrived under.
struct StepRoute {
    let runtime: Runtime
    /// Not retained: `runtime` (held) owns it.
    private let routeRef: Unretained<CompiledRoute>
    var route: CompiledRoute { @inline(__always) get { routeRef.value } }

    /// `route` must be one of `runtime.routes`.
    init(runtime: Runtime, route: CompiledRoute) {
        self.runtime = runtime
        routeRef = Unretained(route)
    }

    var enforcement: Enforcement { route.enforcement }
    var corsPreflight: CORSPreflight { route.corsPreflight }
    var replayProtection: Bool { route.replayProtection }
    /// The route lists `providers` (most do not: then the set is never read).
    var limitsProviders: Bool { route.limitsProviders }
    var providers: Set<String> { route.providers }
    /// `max_risk` and `require_risk` of the route.
    var maxRisk: Int? { route.maxRisk }
    var requireRisk: Bool { route.requireRisk }
    /// `dpop` and `dpop_max_age` of the route (SPEC §4.4).
    var dpop: DPoPMode { route.dpop }
    var dpopMaxAge: Double { route.dpopMaxAge }
}

/// A refusal answered by the gateway itself.
struct Rejection {
    var status: Int
    var code: String
    var reason: String
    var retryAfter: Int? = nil
    /// A DPoP refusal (SPEC §4.4): answered with `WWW-Authenticate: DPoP error="invalid_dpop_proof"`.
    var dpopChallenge = false
}

/// Applies a route's App Check policy (docs/behaviour.md) for one event loop: CORS preflight bypass, header
/// checks, the verified-token cache, signature and claim checks against the loop's key-set snapshot, an
/// unknown-`kid` refetch (the request waits for it), and on replay routes the limited-use check and the
/// single-use consumption.
///
/// The completion runs on the loop thread, synchronously on the fast path.
package final class AppCheckStep {
    static let maxTokenLength = AppCheckToken.maxLength
    /// How long a request waits for the key-set refetch its unknown `kid` triggered.
    static let unknownKidWait = 5.0

    let loop: EventLoop
    /// The loop's counters and its wall clock (`recorder.clock`, the one clock token checks read).
    let recorder: RequestRecorder
    let logSink: LogSink
    /// The gateway's own issuer's public keys (docs/issuer.md), a second key set beside Firebase's; nil without
    /// `issuer:`. Fixed at start.
    let ownKeys: JWKSet?
    /// Fetches Firebase's key set again on an unknown `kid`; nil with `jwks.url: none`.
    let keyProvider: KeyRefetching?
    /// This loop's client of the replay store; nil until a route asks for replay protection (set at start, or by
    /// the reload that adds the first such route: `LoopEnvironment.attachReplayClient`).
    package var replayClient: ReplayClient?
    /// This loop's view of Firebase's key set; replaced through `setKeys`.
    private(set) var keys: LoopKeys?
    /// The key sets of `app_check.trusted_issuers` (another deployment's issuer), in configuration order, each with
    /// the `iss` it vouches for; nil until first fetched. Replaced through `setTrustedKeys`.
    private(set) var trustedKeys: [LoopKeys?] = []
    private(set) var cache: TokenCache
    /// What this loop's token parsing remembers: recent header parts and claim strings (`AppCheckToken.ParseMemo`).
    private let parseMemo = AppCheckToken.ParseMemo()
    private var waiters: [(deadline: Double, retry: () -> Void)] = []
    private lazy var waiterTimer = LoopTimer { [weak self] in self?.expireWaiters() }

    init(loop: EventLoop, recorder: RequestRecorder, logSink: LogSink, ownKeys: JWKSet?, keyProvider: KeyRefetching?,
         replayClient: ReplayClient?, cacheCapacity: Int) {
        self.loop = loop
        self.recorder = recorder
        self.logSink = logSink
        self.ownKeys = ownKeys
        self.keyProvider = keyProvider
        self.replayClient = replayClient
        cache = TokenCache(capacity: cacheCapacity)
    }

    /// A new key set for this loop; requests waiting on an unknown `kid` verify again.
    func setKeys(_ keys: LoopKeys) {
        self.keys = keys
        keysChanged()
    }

    /// A new key set for trusted issuer `index`.
    func setTrustedKeys(_ keys: LoopKeys, index: Int) {
        if trustedKeys.count <= index { trustedKeys += Array(repeating: nil, count: index + 1 - trustedKeys.count) }
        trustedKeys[index] = keys
    }

    /// The wall clock (Unix seconds) of token checks.
    private var wallClock: Double { recorder.clock.now }

    var cachedTokens: Int { cache.count }

    /// `scheme` is the listener's (`http`/`https`) and `peerTrusted` says the client is a trusted proxy: the DPoP
    /// check's `htu` (SPEC §4.4) needs the scheme the client used.
    func evaluate(head: HTTPRequestHead, route: StepRoute, scheme: String, peerTrusted: Bool,
                  completion: @escaping (consuming AppCheckDecision) -> Void) {
        if route.enforcement == .off { return completion(AppCheckDecision(outcome: .skipped)) }
        if route.corsPreflight == .bypass && head.method == "OPTIONS"
            && head.headers.contains(lowercased: "origin")
            && head.headers.contains(lowercased: "access-control-request-method") {
            return completion(AppCheckDecision(outcome: .skipped))
        }
        // The token field, and whether there is a second one, found without allocating.
        guard let tokenIndex = head.headers.firstIndex(ofLiteral: "x-firebase-appcheck") else {
            return completion(missing(head: head, route: route))
        }
        if head.headers.firstIndex(ofLiteral: "x-firebase-appcheck", after: tokenIndex) != nil {
            return completion(refuse(route, .duplicateHeader, fingerprint: nil))
        }
        let field = head.headers.fields[tokenIndex]
        let length = Int(field.valueEnd - field.valueStart)
        if length == 0 { return completion(missing(head: head, route: route)) }
        if length > Self.maxTokenLength { return completion(refuse(route, .tooLarge, fingerprint: nil)) }
        // The verified-token cache serves session tokens. A replay-protected route takes only limited-use tokens,
        // each good for one request, so it neither looks them up nor fills the cache with them (they would push
        // session tokens out). A hit reads the token where it lies in the head: no copy.
        var key: TokenCache.Key?
        var proofInput = DPoPInput(head: head, tokenIndex: tokenIndex, scheme: scheme, peerTrusted: peerTrusted)
        if !route.replayProtection {
            let found = head.headers.withValueBytes(at: tokenIndex) { TokenCache.Key(token: $0) }
            key = found
            proofInput.cacheKey = found
            let now = wallClock
            if let hit = cache.get(found, now: now), let policy = hitPolicy(hit, now: now, runtime: route.runtime) {
                recorder.metrics.tokenCacheHits += 1
                var fingerprint = hit.fingerprint
                if fingerprint == nil && logSink.enabled(.info) {
                    // Cached while logging was off (log_level changed by a reload): compute it once, keep it.
                    let computed = AppCheckVerifier.logFingerprint(head.headers.valueSlice(at: tokenIndex))
                    cache.setFingerprint(found, computed)
                    fingerprint = computed
                }
                proofInput.ath = hit.ath
                return conclude(hit.claims, policy: policy, now: now, fingerprint: fingerprint, route: route,
                                proofInput: proofInput, completion: completion)
            }
        }
        // Parsed where it lies in the head's bytes: no copy.
        verify(token: head.headers.valueSlice(at: tokenIndex), key: key, route: route, mayWait: true,
               proofInput: proofInput, completion: completion)
    }

    /// The policy a cached token follows, when the key set that holds its `kid` is still usable; nil when none is (the
    /// token then goes the uncached way). An entry verified by the loop's current Firebase set, while no other set
    /// is in use, needs no `kid` look-up: that immutable set holds the `kid` (`TokenCache.Entry.verifiedBy`).
    @inline(__always)
    private func hitPolicy(_ hit: TokenCache.Entry, now: Double, runtime: Runtime) -> AppCheckPolicy? {
        if let via = hit.verifiedBy, via === keys, ownKeys == nil, trustedKeys.isEmpty {
            return via.usable(at: now) ? runtime.policy : nil
        }
        guard let keys = keySet(for: hit.kid, now: now, runtime: runtime), keys.set.key(for: hit.kid) != nil else { return nil }
        return keys.policy ?? runtime.policy
    }

    /// Two key sets (docs/issuer.md): the gateway's own issuer's, fixed at start, and Firebase's snapshot. The
    /// `kid` picks the set, and the set fixes the `iss` the token must carry: a key vouches only for its own
    /// issuer. Own tokens verify even while Firebase's set is unavailable. Trusted issuers (another deployment's)
    /// are sets of their own too, each vouching for its own `iss`. Returns the set that holds `kid` and the policy
    /// its tokens follow (`policy` nil: Firebase's, the runtime's own); Firebase's set when no other holds it.
    private func keySet(for kid: String, now: Double, runtime: Runtime) -> (set: JWKSet, policy: AppCheckPolicy?)? {
        // Firebase's set alone (the usual deployment): nothing else to look in.
        if ownKeys == nil && trustedKeys.isEmpty {
            return keys.flatMap { $0.usable(at: now) ? ($0.set, nil) : nil }
        }
        if let own = ownKeys, own.key(for: kid) != nil { return (own, runtime.ownIssuerPolicy) }
        let trusted = trustedKeys
        if !trusted.isEmpty {
            for (i, keys) in trusted.enumerated() {
                if let keys, keys.usable(at: now), keys.set.key(for: kid) != nil, i < runtime.trustedIssuerPolicies.count {
                    return (keys.set, runtime.trustedIssuerPolicies[i])
                }
            }
        }
        return keys.flatMap { $0.usable(at: now) ? ($0.set, nil) : nil }
    }

    /// With `app_check.jwks.url: none`, why a token whose `kid` no usable set holds is refused, judged by its (not yet
    /// verified) `iss` (missing or not a string: `malformed`): an issuer no set in use vouches for — Firebase's above all — is `wrong_issuer`; the own issuer's,
    /// or a trusted issuer's whose set is usable, is `unknown_kid`. Nil for a trusted issuer whose set is not usable
    /// yet (or no longer): that is `jwks_unavailable`, as with Firebase's set in use.
    private func refusalWithoutFirebase(_ parsed: ParsedToken, now: Double, runtime: Runtime) -> AppCheckReason? {
        guard let iss = parsed.claims.issuer else { return .malformed }  // missing or not a string (§4.2)
        if let own = runtime.ownIssuerPolicy, own.issuer == iss { return .unknownKid }
        if let index = runtime.trustedIssuerPolicies.firstIndex(where: { $0.issuer == iss }) {
            let trusted = trustedKeys
            let usable = index < trusted.count && trusted[index]?.usable(at: now) == true
            return usable ? .unknownKid : nil
        }
        return .wrongIssuer
    }

    /// Not served from the cache: parse, pick the key set, verify the signature (waiting once for a key-set refetch
    /// on an unknown `kid`), fill the cache (`key` given: a session token on a route without replay protection).
    private func verify(token: ArraySlice<UInt8>, key: TokenCache.Key?, route: StepRoute, mayWait: Bool,
                        proofInput: DPoPInput, completion: @escaping (consuming AppCheckDecision) -> Void) {
        let now = wallClock
        if key != nil { recorder.metrics.tokenCacheMisses += 1 }
        // `token_sha256` is for the access log: computed only when a log line will carry it.
        let fingerprint = logSink.enabled(.info) ? AppCheckVerifier.logFingerprint(token) : nil
        // Returned, not switched out of a `Result`: that copied the token (each of its strings and arrays retained and
        // released once more).
        let parsed: ParsedToken
        do { parsed = try AppCheckToken.parsed(token, memo: parseMemo) }
        catch { return completion(refuse(route, error, fingerprint: fingerprint)) }
        guard let found = keySet(for: parsed.kid, now: now, runtime: route.runtime) else {
            if route.runtime.firebaseUnused, let reason = refusalWithoutFirebase(parsed, now: now, runtime: route.runtime) {
                return completion(refuse(route, reason, fingerprint: fingerprint))
            }
            var outcome = AppCheckOutcome(status: .invalid, outcome: .invalid, reason: "jwks_unavailable")
            outcome.tokenSHA256 = fingerprint
            if route.enforcement == .monitor { return completion(AppCheckDecision(outcome: outcome)) }
            return completion(AppCheckDecision(outcome: outcome, rejection: Rejection(
                status: 503, code: "jwks_unavailable", reason: "jwks_unavailable", retryAfter: 5)))
        }
        if let reason = AppCheckVerifier.verifySignature(parsed, keys: found.set) {
            if reason == .unknownKid, mayWait, keyProvider?.unknownKid(parsed.kid) == true {
                park(until: now + Self.unknownKidWait) { [weak self] in
                    self?.verify(token: token, key: key, route: route, mayWait: false, proofInput: proofInput,
                                 completion: completion)
                }
                return
            }
            return completion(refuse(route, reason, fingerprint: fingerprint))
        }
        // The claims are read where the parse left them (a local copy retained each of their strings).
        if let key, let exp = parsed.claims.expiresAt {
            // Only Firebase's set in use: `keySet` found the kid in `keys`, whose set this is.
            let onlyFirebase = found.policy == nil && ownKeys == nil && trustedKeys.isEmpty
            cache.put(key, TokenCache.Entry(claims: parsed.claims, kid: parsed.kid, fingerprint: fingerprint,
                                            until: exp + route.runtime.policy.clockSkew,
                                            verifiedBy: onlyFirebase ? keys : nil), now: now)
        }
        // Firebase's tokens follow the runtime's policy.
        conclude(parsed.claims, policy: found.policy ?? route.runtime.policy, now: now, fingerprint: fingerprint,
                 route: route, proofInput: proofInput, completion: completion)
    }

    /// The checks every token passes, cached or not, in the same order (SPEC §4.2): claims and time, the route's
    /// providers, the DPoP proof of a bound token (SPEC §4.4, also on every cache hit), and on replay routes the
    /// limited-use check and the single-use consumption.
    private func conclude(_ claims: TokenClaims, policy: AppCheckPolicy, now: Double, fingerprint: String?,
                          route: StepRoute, proofInput: DPoPInput,
                          completion: @escaping (consuming AppCheckDecision) -> Void) {
        let verified: VerifiedClaims
        do { verified = try AppCheckVerifier.verifiedClaims(claims, policy: policy, now: now) }
        catch { return completion(refuse(route, error, fingerprint: fingerprint)) }
        if let reason = (route.limitsProviders ? AppCheckVerifier.checkProvider(verified, allowed: route.providers) : nil)
            ?? AppCheckVerifier.checkRisk(verified, maxRisk: route.maxRisk, requireRisk: route.requireRisk) {
            return completion(refuse(route, reason, fingerprint: fingerprint, appId: verified.appId))
        }
        if verified.boundThumbprint != nil || route.dpop == .required {
            return checkProof(verified, input: proofInput, policy: policy, now: now, fingerprint: fingerprint,
                              route: route, completion: completion) { [weak self] in
                self?.limitedUse(verified, policy: policy, now: now, fingerprint: fingerprint, route: route,
                                 bound: true, completion: completion)
            }
        }
        limitedUse(verified, policy: policy, now: now, fingerprint: fingerprint, route: route, bound: false,
                   completion: completion)
    }

    /// Step 8 of SPEC §4.2 for a token that passed everything before it: on replay routes the limited-use check and
    /// the single-use consumption; else verified at once. `bound`: its DPoP proof passed. `now`: the wall clock read
    /// once for this request, handed to a store that answers at once (no second read).
    private func limitedUse(_ verified: VerifiedClaims, policy: AppCheckPolicy, now: Double, fingerprint: String?,
                            route: StepRoute, bound: Bool, completion: @escaping (consuming AppCheckDecision) -> Void) {
        // Made where it is handed over on the common path (no replay check): one made earlier and also captured
        // by the replay store's callback below was copied, strings and all, twice per request.
        guard route.replayProtection else {
            return completion(AppCheckDecision(outcome: AppCheckOutcome(
                status: .verified, outcome: .verified, appId: verified.appId, tokenSHA256: fingerprint, bound: bound)))
        }
        let outcome = AppCheckOutcome(status: .verified, outcome: .verified, appId: verified.appId,
                                      tokenSHA256: fingerprint, bound: bound)
        if let reason = AppCheckVerifier.checkLimitedUse(verified, policy: policy) {
            return completion(refuse(route, reason, fingerprint: fingerprint, appId: verified.appId))
        }
        guard let replay = replayClient else {
            return completion(storeUnavailable(outcome))
        }
        let expiresAt = verified.expiresAt + policy.clockSkew, issuedAt = verified.issuedAt - policy.clockSkew
        // A store that keys a token with a jti on its identity itself (memory, whose keys never leave the process) is
        // spared the replay key's SHA-256; one that answers at once (memory) is asked without a callback: no closure.
        if let jti = verified.jti,
           let result = replay.consumeNow(sub: verified.appId, jti: jti, expiresAt: expiresAt, issuedAt: issuedAt, now: now) {
            return completion(replayDecision(result, outcome: outcome, route: route, fingerprint: fingerprint,
                                             appId: verified.appId))
        }
        let replayKey = verified.replayKey
        if let result = replay.consumeNow(key: ReplayKey(words: replayKey.words), expiresAt: expiresAt,
                                          issuedAt: issuedAt, now: now) {
            return completion(replayDecision(result, outcome: outcome, route: route, fingerprint: fingerprint,
                                             appId: verified.appId))
        }
        replay.consume(key: replayKey.bytes, expiresAt: expiresAt, issuedAt: issuedAt) { [weak self] result in
            guard let self else { return }
            completion(self.replayDecision(result, outcome: outcome, route: route, fingerprint: fingerprint,
                                           appId: verified.appId))
        }
    }

    /// The decision for a verified token once the replay store has answered.
    private func replayDecision(_ result: ReplayResult, outcome: consuming AppCheckOutcome, route: StepRoute,
                                fingerprint: String?, appId: String) -> AppCheckDecision {
        switch result {
        case .consumed: AppCheckDecision(outcome: outcome)
        case .reused: refuse(route, .reused, fingerprint: fingerprint, appId: appId)
        case .unavailable: storeUnavailable(outcome)
        }
    }

    func storeUnavailable(_ verified: AppCheckOutcome) -> AppCheckDecision {
        var outcome = verified
        outcome.status = .invalid
        outcome.outcome = .invalid
        outcome.reason = "replay_store_unavailable"
        return AppCheckDecision(outcome: outcome, rejection: Rejection(
            status: 503, code: "replay_store_unavailable", reason: "replay_store_unavailable", retryAfter: 1))
    }

    /// No token: Firebase's "outdated client" when the request matches `app_check.outdated_client`, else
    /// "unknown origin".
    private func missing(head: HTTPRequestHead, route: StepRoute) -> AppCheckDecision {
        var outcome = AppCheckOutcome(status: .missing, outcome: .unknownOrigin, reason: AppCheckReason.missing.rawValue)
        if let matcher = route.runtime.outdatedClient, matcher.matches(head.headers) {
            outcome.outcome = .outdatedClient
        }
        if route.enforcement == .monitor { return AppCheckDecision(outcome: outcome) }
        return AppCheckDecision(outcome: outcome, rejection: Rejection(
            status: 401, code: "app_check_token_missing", reason: AppCheckReason.missing.rawValue))
    }

    private func refuse(_ route: StepRoute, _ reason: AppCheckReason, fingerprint: String?,
                        appId: String? = nil) -> AppCheckDecision {
        let reused = reason == .reused
        var outcome = AppCheckOutcome(status: reused ? .reused : .invalid, outcome: reused ? .reused : .invalid,
                                      reason: reason.rawValue)
        outcome.tokenSHA256 = fingerprint
        outcome.appId = appId
        if route.enforcement == .monitor { return AppCheckDecision(outcome: outcome) }
        return AppCheckDecision(outcome: outcome, rejection: Rejection(
            status: 401, code: reused ? "app_check_token_reused" : "app_check_token_invalid", reason: reason.rawValue))
    }

    // MARK: waiting for a key-set refetch

    private func park(until deadline: Double, retry: @escaping () -> Void) {
        waiters.append((deadline, retry))
        let ns = loop.now + .nanoseconds(Self.unknownKidWait)
        if !waiterTimer.isArmed { loop.schedule(waiterTimer, at: ns) }
    }

    /// A new key-set snapshot arrived on this loop: the waiting requests verify again (no second wait).
    func keysChanged() {
        let pending = waiters
        waiters.removeAll()
        loop.cancel(waiterTimer)
        for w in pending { w.retry() }
    }

    private func expireWaiters() {
        let now = wallClock
        let due = waiters.filter { $0.deadline <= now }
        waiters.removeAll { $0.deadline <= now }
        for w in due { w.retry() }
        if let next = waiters.map(\.deadline).min() {
            loop.schedule(waiterTimer, at: loop.now + .nanoseconds(max(0.01, next - now)))
        }
    }
}
