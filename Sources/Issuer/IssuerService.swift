import AppAttest
import AppCheck
import Foundation
import GatewayConfig
import JSONLog
import KeySets
import ReplayStores

/// What an issuer call produced: the response to send and the fields of its one log line.
public struct IssuerOutcome: Sendable {
    public var status: Int
    public var body: [UInt8]
    /// Extra response headers (`Cache-Control` on the key set); `Content-Type: application/json` always.
    public var headers: [(String, String)] = []
    /// For the log line and `appcheck_issuer_exchanges_total{app_id,method,result}`: `minted`, `challenge`,
    /// `jwks`, or the refusal category; `rule` names the failing rule (empty on success).
    public var appId: String
    public var method: String
    public var result: String
    public var rule: String
    /// More for the log line (Apple's reason for a refused device token); empty when there is none.
    public var detail: String = ""

    package static func failure(_ error: IssuerError, appId: String, method: String) -> IssuerOutcome {
        IssuerOutcome(status: error.code, body: error.body, headers: error.retryAfter.map { [("Retry-After", String($0))] } ?? [],
                      appId: appId, method: method, result: error.metricResult, rule: error.rule, detail: error.detail)
    }
}

/// The self-hosted App Check provider of docs/issuer.md, independent of HTTP/1.1 or HTTP/2: a built-in handler
/// hands it the matched `IssuerPath`, the request method and the body, and sends back the outcome. Runs off
/// the event loops (it awaits its state store, and attestation checks cost CPU); safe to call concurrently.
public final class IssuerService: Sendable {
    public let settings: IssuerSettings
    public let projectNumber: String
    public let projectId: String?
    public let keys: IssuerKeys
    package let state: IssuerState
    let limits: IssuerLimits
    let clock: @Sendable () -> Double
    private let debugSecrets: [String: DebugSecrets]
    /// One App Attest verifier per app with `app_attest`, trusting Apple's root or the app's `root_ca_file`.
    private let verifiers: [String: AppAttestVerifier]
    /// One receipt verifier per app with `app_attest` (IssuerService+Receipts.swift).
    let receiptVerifiers: [String: AppAttestReceiptVerifier]
    /// Exchanges receipts with Apple for a fresh risk metric, when an app has a DeviceCheck key (RiskRefresher.swift).
    public let riskRefresher: RiskRefresher?
    /// The risk histogram, refusals for risk and keys per metric bucket (RiskMetrics.swift).
    package let riskMetrics: RiskMetrics
    /// Verifiers, policies and status lists of the apps with `android` (IssuerService+Android.swift).
    let androidApps: AndroidKeyApps
    /// One DeviceCheck client per app with `device_check`.
    private let deviceCheck: [String: DeviceCheckClient]
    /// The backends of `custom_token_issuers`.
    private let customIssuers: CustomTokenIssuers
    let log: LogSink?
    /// Where the OIDC discovery document is served (normalised), and the document itself (docs/issuer.md).
    public let discoveryPath: String?
    public let discoveryDocument: [UInt8]

    /// How long a device token is remembered as exchanged.
    static let deviceTokenMemory = 24.0 * 3600
    /// Largest device token accepted, in decoded bytes (Apple's are about 2–3 KB).
    static let maxDeviceTokenBytes = 16 * 1024

    /// Throws when an app's `root_ca_file` or `.p8` key cannot be read.
    /// - Parameters:
    ///   - jwks: the timings custom-token key sets are fetched with (`app_check.jwks`; its URL is not used).
    ///   - clockSkew: allowance on custom tokens' `iat` and `exp` (`app_check.clock_skew`).
    public init(settings: IssuerSettings, projectNumber: String, projectId: String?, keys: IssuerKeys,
                state: IssuerState, jwks: JWKSSettings = JWKSSettings(), clockSkew: Double = 10,
                log: LogSink? = nil,
                clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) throws {
        self.settings = settings
        self.log = log
        self.projectNumber = projectNumber
        self.projectId = projectId
        self.keys = keys
        self.state = state
        self.clock = clock
        limits = IssuerLimits(perSecond: settings.maxExchangesPerSecond, perAddress: settings.maxExchangesPerAddress,
                              perApp: Dictionary(settings.apps.compactMap { app in app.maxExchangesPerSecond.map { (app.appId, $0) } },
                                                 uniquingKeysWith: { a, _ in a }))
        debugSecrets = Dictionary(settings.apps.map { ($0.appId, DebugSecrets($0.debugSecrets)) }, uniquingKeysWith: { a, _ in a })
        var verifiers: [String: AppAttestVerifier] = [:]
        for app in settings.apps {
            guard let attest = app.appAttest else { continue }
            let pem = try attest.rootCAFile.map { try String(contentsOfFile: $0, encoding: .utf8) } ?? AppAttestRootCA.applePEM
            verifiers[app.appId] = try AppAttestVerifier(rootCertificatePEM: pem)
        }
        self.verifiers = verifiers
        androidApps = try AndroidKeyApps(settings: settings)
        let receiptVerifiers = try Self.receiptVerifiers(settings)
        self.receiptVerifiers = receiptVerifiers
        let riskMetrics = RiskMetrics(apps: settings.apps.filter { $0.appAttest != nil }.map(\.appId))
        self.riskMetrics = riskMetrics
        riskRefresher = try (state as? IssuerReceiptState).flatMap { receiptState in
            try RiskRefresher(settings: settings, state: receiptState, verifiers: receiptVerifiers, metrics: riskMetrics,
                              log: log, clock: clock)
        }
        var deviceCheck: [String: DeviceCheckClient] = [:]
        for app in settings.apps {
            guard let dc = app.deviceCheck, let teamId = app.teamId else { continue }
            deviceCheck[app.appId] = try DeviceCheckClient(settings: dc, teamId: teamId)
        }
        self.deviceCheck = deviceCheck
        customIssuers = CustomTokenIssuers(settings.customTokenIssuers, jwks: jwks, clockSkew: clockSkew,
                                           log: log ?? LogSink(level: .error))
        discoveryPath = IssuerPath.discoveryPath(issuerURL: settings.issuerURL, projectNumber: projectNumber)
        discoveryDocument = Array(Self.discoveryJSON(settings, projectNumber: projectNumber).utf8)
    }

    /// `authorization_endpoint` of the discovery document. OpenID Connect Discovery 1.0 §3 marks it REQUIRED, but the
    /// issuer is no OAuth 2.0 authorization server: tokens come from the exchange methods, called by the app's own
    /// code. A URN names that honestly and can never be mistaken for a page to send a browser to (Kubernetes' service
    /// account issuer publishes `urn:kubernetes:programmatic_authorization` for the same reason).
    public static let authorizationEndpointURN = "urn:appcheck-gateway:programmatic_exchange"

    /// The OIDC discovery document (OpenID Connect Discovery 1.0 §3) for tokens minted here: `issuer` is exactly
    /// their `iss`; `jwks_uri` is `<issuer_url origin><base_path>/v1/jwks` (the base path, which may differ from the
    /// issuer URL's path); every REQUIRED field, and the RECOMMENDED `claims_supported`. Keys in a fixed order.
    static func discoveryJSON(_ settings: IssuerSettings, projectNumber: String) -> String {
        let origin = IssuerURLParts(settings.issuerURL).origin
        let fields: [(String, String)] = [
            ("issuer", JSONText.quote(settings.tokenIssuer(projectNumber: projectNumber))),
            ("jwks_uri", JSONText.quote(origin + settings.basePath + "/v1/jwks")),
            ("authorization_endpoint", JSONText.quote(authorizationEndpointURN)),
            ("response_types_supported", "[\"id_token\"]"),
            ("subject_types_supported", "[\"public\"]"),
            ("id_token_signing_alg_values_supported", "[\"RS256\"]"),
            ("claims_supported", "[" + ["iss", "sub", "aud", "iat", "exp", "jti", "provider", "risk", "cnf"].map(JSONText.quote)
                .joined(separator: ",") + "]"),
        ]
        return "{" + fields.map { JSONText.quote($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }

    /// Starts fetching the custom-token backends' key sets.
    public func start() {
        customIssuers.start()
        riskRefresher?.start()
    }

    /// Stops the key-set threads.
    public func stop() {
        customIssuers.stop()
        riskRefresher?.stop()
    }

    /// Whether `app` may call `method`: the methods its section enables, and `exchangeCustomToken` for every app
    /// when `custom_token_issuers` is set.
    func allows(_ method: IssuerMethod, for app: IssuerAppSettings) -> Bool {
        settings.methods(for: app).contains(method.rawValue)
    }

    /// `iss` of the tokens minted here.
    public var tokenIssuer: String { settings.tokenIssuer(projectNumber: projectNumber) }

    /// Answers one call. `httpMethod` is the request method (`GET` for the key set, `POST` for the rest); `client`
    /// the caller's `ClientAddressKey`, which the per-address limits are charged to.
    public func handle(_ path: IssuerPath, httpMethod: String, body: [UInt8], client: String = "") async -> IssuerOutcome {
        if let refused = preflight(path, httpMethod: httpMethod, bodyCount: body.count, client: client) { return refused }
        return await process(path, httpMethod: httpMethod, body: body, client: client)
    }

    /// The cheap refusals, decided without reading the body or touching the state store, so that a flood costs
    /// neither evidence work nor a hop off the event loop: an unknown project, app or method, a body over the
    /// limit, the rate limits (charged here, per address, per app, then the process ceiling), and an address that
    /// used up its debug-secret guesses. Nil when the call may go on to `process`.
    public func preflight(_ path: IssuerPath, httpMethod: String, bodyCount: Int, client: String) -> IssuerOutcome? {
        guard case let .method(project, appId, method) = path else { return nil }
        do throws(IssuerError) {
            guard httpMethod == "POST" else { throw .notFound("method_not_post", "Exchange methods are called with POST.") }
            guard project == projectNumber || (projectId != nil && project == projectId) else {
                throw .notFound("unknown_project", "No such project.")
            }
            guard let app = settings.app(appId) else { throw .notFound("unknown_app", "No such app.") }
            guard allows(method, for: app) else { throw .notFound("method_not_enabled", "No such method for this app.") }
            guard bodyCount <= IssuerJSON.maxBodyBytes else { throw .bodyTooLarge }
            let now = clock()
            if method == .exchangeDebugToken, !limits.debugGuessAllowed(address: client, now: now) {
                throw .limited("debug_guesses_exhausted")
            }
            if case .refused(let rule) = limits.admit(address: client, appId: app.appId, now: now) { throw .limited(rule) }
            return nil
        } catch {
            return .failure(error, appId: appId, method: method.rawValue)
        }
    }

    /// The call past `preflight` (which must have admitted it).
    public func process(_ path: IssuerPath, httpMethod: String, body: [UInt8], client: String) async -> IssuerOutcome {
        switch path {
        case .jwks:
            guard httpMethod == "GET" || httpMethod == "HEAD" else {
                return .failure(.notFound("jwks_not_get", "The key set is read with GET."), appId: "", method: "jwks")
            }
            return IssuerOutcome(status: 200, body: keys.document, headers: [("Cache-Control", "public, max-age=3600")],
                                 appId: "", method: "jwks", result: "jwks", rule: "")
        case .discovery:
            guard httpMethod == "GET" || httpMethod == "HEAD" else {
                return .failure(.notFound("discovery_not_get", "The discovery document is read with GET."), appId: "",
                                method: "discovery")
            }
            return IssuerOutcome(status: 200, body: discoveryDocument, headers: [("Cache-Control", "public, max-age=3600")],
                                 appId: "", method: "discovery", result: "discovery", rule: "")
        case let .unknown(rule):
            return .failure(.notFound(rule, "No such method."), appId: "", method: "unknown")
        case let .method(_, appId, method):
            do {
                return try await call(method, appId: appId, body: body, client: client)
            } catch {
                return .failure(error, appId: appId, method: method.rawValue)
            }
        }
    }

    private func call(_ method: IssuerMethod, appId: String, body: [UInt8], client: String) async throws(IssuerError) -> IssuerOutcome {
        guard let app = settings.app(appId) else { throw .notFound("unknown_app", "No such app.") }
        let json = try IssuerJSON(body: body)

        switch method {
        case .generateAppAttestChallenge, .generateAndroidKeyChallenge:
            return try await challenge(app, client: client, method: method)
        case .exchangeDebugToken:
            let presented = try json.string("debug_token")
            let limitedUse = try json.limitedUse()
            guard debugSecrets[app.appId]?.matches(presented) == true else {
                limits.debugGuessFailed(address: client, now: clock())
                throw .permissionDenied("debug_secret_unknown")
            }
            return try mintOutcome(app, method: method, limitedUse: limitedUse)
        case .exchangeAppAttestAttestation:
            return try await attestation(app, json)
        case .exchangeAppAttestAssertion:
            return try await assertion(app, json)
        case .exchangeDeviceCheckToken:
            return try await deviceCheckToken(app, json)
        case .exchangeAndroidKeyAttestation:
            return try await androidAttestation(app, json)
        case .exchangeAndroidKeyAssertion:
            return try await androidAssertion(app, json)
        case .exchangeCustomToken:
            let token = try json.string("custom_token")
            let limitedUse = try json.limitedUse()
            let now = clock()
            let verified = try await customIssuers.verify(token, appId: app.appId, audience: settings.issuerURL, now: now)
            try await consumeOnce(verified.usedRecord, until: verified.rememberUntil, now: now, reused: "custom_token_reused")
            return try mintOutcome(app, method: method, limitedUse: limitedUse)
        }
    }

    /// `exchangeDeviceCheckToken` (docs/issuer.md): Apple is asked first; only a token Apple calls valid is recorded
    /// (its SHA-256, for 24 h), and only the first exchange that records it mints. A token Apple refused, or that
    /// could not be checked, stays unrecorded so a retry after Apple's outage can succeed.
    private func deviceCheckToken(_ app: IssuerAppSettings, _ json: IssuerJSON) async throws(IssuerError) -> IssuerOutcome {
        let token = try json.bytes("device_token", maxBytes: Self.maxDeviceTokenBytes)
        let limitedUse = try json.limitedUse()
        guard let client = deviceCheck[app.appId] else { throw .notFound("method_not_enabled", "No such method for this app.") }
        switch await client.validate(deviceToken: token, now: clock()) {
        case .valid:
            break
        case .refused(let reason):
            throw .permissionDenied("devicecheck_refused", detail: reason)
        case let .keyRefused(status, reason):
            log?.error("DeviceCheck refused the configured key: check issuer.apps[].device_check key_id and private_key, "
                      + "the app's team_id, and that the key has DeviceCheck enabled",
                      [("app_id", .string(app.appId)), ("key_id", .string(client.keyId)),
                       ("apple_status", .int(status)), ("apple_reason", .string(reason))])
            throw .unavailable("devicecheck_key_refused", detail: "HTTP \(status): \(reason)")
        case .unavailable(let why):
            throw .unavailable("devicecheck_unavailable", detail: why)
        }
        let now = clock()
        try await consumeOnce(AppCheckVerifier.tokenHash(token), until: now + Self.deviceTokenMemory, now: now,
                              reused: "device_token_reused")
        return try mintOutcome(app, method: .exchangeDeviceCheckToken, limitedUse: limitedUse)
    }

    /// Records a one-time input; refuses with `reused` when it was already recorded.
    private func consumeOnce(_ digest: [UInt8], until expiresAt: Double, now: Double,
                             reused: String) async throws(IssuerError) {
        let first: Bool
        do { first = try await state.consumeOnce(digest, expiresAt: expiresAt, now: now) } catch {
            throw .unavailable("state_unavailable")
        }
        guard first else { throw .permissionDenied(reused) }
    }

    /// `generateAppAttestChallenge`: 32 random bytes, single use, bound to the app, `challenge_ttl`.
    /// `client` holds at most `max_challenges_per_address` outstanding challenges (in every store), so one address
    /// cannot fill the store's capacity for everyone.
    private func challenge(_ app: IssuerAppSettings, client: String, method: IssuerMethod) async throws(IssuerError) -> IssuerOutcome {
        var generator = SystemRandomNumberGenerator()
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let now = clock()
        let admission: ChallengeAdmission
        do {
            admission = try await state.putChallenge(challenge, appId: app.appId, address: client, now: now,
                                                     expiresAt: now + settings.challengeTTL,
                                                     maxPerAddress: settings.maxChallengesPerAddress)
        } catch {
            throw .unavailable("state_unavailable")
        }
        switch admission {
        case .stored: break
        case .addressFull: throw .limited("challenge_address_full")
        case .storeFull: throw .unavailable("challenge_store_full")
        }
        return IssuerOutcome(status: 200, body: IssuerResponse.challenge(challenge, ttl: Int(settings.challengeTTL)),
                             appId: app.appId, method: method.rawValue, result: "challenge", rule: "")
    }

    /// `exchangeAppAttestAttestation` (docs/issuer.md): the challenge is used up first, then the attestation is
    /// verified in Apple's order, the key stored (counter 0) and a token minted. The artifact is the key ID: opaque
    /// to the client, it names the stored key in later assertions.
    private func attestation(_ app: IssuerAppSettings, _ json: IssuerJSON) async throws(IssuerError) -> IssuerOutcome {
        let object = try json.bytes("attestation", aliases: ["attestation_statement", "attestationStatement"])
        let challenge = try json.bytes("challenge", maxBytes: 1024)
        let keyId = try json.bytes("key_id", maxBytes: 64)
        let limitedUse = try json.limitedUse()
        try await useChallenge(challenge, app)
        guard let verifier = verifiers[app.appId], let teamId = app.teamId, let bundleId = app.bundleId else {
            throw .notFound("method_not_enabled", "No such method for this app.")
        }
        let now = clock()
        let verified: AppAttestAttestation
        do {
            verified = try verifier.verifyAttestation(
                object, keyId: keyId, clientDataHash: AppAttestVerifier.clientDataHash(challenge: challenge),
                appId: AppAttestAppID(teamId: teamId, bundleId: bundleId),
                environments: Set(app.appAttest?.environments ?? []), at: Int64(now))
        } catch {
            throw Self.refusal(error)
        }
        let key = withVerifiedReceipt(
            AttestedKey(keyId: verified.keyId, appId: app.appId, publicKey: verified.publicKey.uncompressedPoint,
                        counter: 0, environment: verified.environment.rawValue, receipt: verified.receipt, attestedAt: now),
            verified, app: app, appId: AppAttestAppID(teamId: teamId, bundleId: bundleId),
            clientDataHash: AppAttestVerifier.clientDataHash(challenge: challenge), now: now)
        let stored: Bool
        do { stored = try await state.insertKey(key) } catch { throw .unavailable("state_unavailable") }
        guard stored else { throw .permissionDenied("key_already_attested") }
        riskMetrics.sawKey(key.keyId, appId: app.appId, metric: key.riskMetric, now: now)
        let ttl = ttl(app, limitedUse: limitedUse)
        let token = try mint(app, provider: "app_attest", ttl: ttl, risk: key.riskMetric)
        return IssuerOutcome(status: 200, body: IssuerResponse.attestation(artifact: verified.keyId, token: token, ttl: ttl),
                             appId: app.appId, method: IssuerMethod.exchangeAppAttestAttestation.rawValue,
                             result: "minted", rule: "")
    }

    /// `exchangeAppAttestAssertion`: the challenge is used up, the artifact names a stored key of this app, the
    /// signature verifies over SHA-256(authenticatorData ‖ SHA-256(artifact ‖ challenge)), and the counter is
    /// accepted by the store's counter window (never accepted before, at most 64 below the highest) in one atomic
    /// step, so two assertions with the same counter never both mint.
    private func assertion(_ app: IssuerAppSettings, _ json: IssuerJSON) async throws(IssuerError) -> IssuerOutcome {
        let artifact = try json.bytes("artifact", maxBytes: 1024)
        let object = try json.bytes("assertion")
        let challenge = try json.bytes("challenge", maxBytes: 1024)
        let limitedUse = try json.limitedUse()
        try await useChallenge(challenge, app)
        guard let verifier = verifiers[app.appId], let teamId = app.teamId, let bundleId = app.bundleId else {
            throw .notFound("method_not_enabled", "No such method for this app.")
        }
        let stored: AttestedKey?
        do { stored = try await state.key(artifact, appId: app.appId) } catch { throw .unavailable("state_unavailable") }
        // An Android key (same store) never passes as an App Attest key.
        guard let stored, stored.environment != AndroidKeyApps.environment else { throw .permissionDenied("unknown_artifact") }
        guard let publicKey = AppAttestPublicKey(uncompressedPoint: stored.publicKey) else {
            throw .permissionDenied(AppAttestRule.storedKey.rawValue)
        }
        let verified: AppAttestAssertion
        do {
            verified = try verifier.verifyAssertion(object, clientData: artifact + challenge, publicKey: publicKey,
                                                    appId: AppAttestAppID(teamId: teamId, bundleId: bundleId))
        } catch {
            throw Self.refusal(error)
        }
        let risk = try riskVerdict(stored, app: app)
        let verdict: CounterVerdict
        do { verdict = try await state.acceptCounter(artifact, appId: app.appId, counter: verified.counter) } catch {
            throw .unavailable("state_unavailable")
        }
        switch verdict {
        case .accepted: break
        case .repeated: throw .permissionDenied("counter_repeated")
        case .belowWindow: throw .permissionDenied("counter_below_window")
        case .unknownKey: throw .permissionDenied("unknown_artifact")
        }
        return try mintOutcome(app, method: .exchangeAppAttestAssertion, limitedUse: limitedUse, risk: risk)
    }

    /// Takes the challenge (single use, bound to the app, within `challenge_ttl`) or refuses.
    func useChallenge(_ challenge: [UInt8], _ app: IssuerAppSettings) async throws(IssuerError) {
        let valid: Bool
        do { valid = try await state.takeChallenge(challenge, appId: app.appId, now: clock()) } catch {
            throw .unavailable("state_unavailable")
        }
        guard valid else { throw .permissionDenied("challenge_unknown") }
    }

    /// An App Attest refusal: malformed evidence is 400, a broken rule 403; the rule goes to the log.
    static func refusal(_ failure: AppAttestFailure) -> IssuerError {
        failure.rule.isMalformedInput
            ? .invalidArgument(failure.rule.rawValue, "The attestation evidence is malformed.")
            : .permissionDenied(failure.rule.rawValue)
    }

    /// The minted token's lifetime for `app`.
    func ttl(_ app: IssuerAppSettings, limitedUse: Bool) -> Int {
        Int(limitedUse ? (app.limitedUseTTL ?? settings.limitedUseTTL) : (app.sessionTTL ?? settings.sessionTTL))
    }

    func mintOutcome(_ app: IssuerAppSettings, method: IssuerMethod, limitedUse: Bool,
                             risk: Int? = nil) throws(IssuerError) -> IssuerOutcome {
        let ttl = ttl(app, limitedUse: limitedUse)
        let token = try mint(app, provider: method.provider ?? "unspecified", ttl: ttl, risk: risk)
        return IssuerOutcome(status: 200, body: IssuerResponse.token(token, ttl: ttl), appId: app.appId,
                             method: method.rawValue, result: "minted", rule: "")
    }

    /// A token per docs/issuer.md "Minted tokens": header `{"alg":"RS256","kid","typ":"JWT"}`; claims `iss`, `sub`,
    /// `aud` (number, then ID when set), `iat`, `exp`, `jti` (128 random bits, always) and `provider`; `risk` (App
    /// Attest's risk metric) when known.
    func mint(_ app: IssuerAppSettings, provider: String, ttl: Int, risk: Int? = nil) throws(IssuerError) -> String {
        let now = Int(clock())
        var generator = SystemRandomNumberGenerator()
        let jti = Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        var audiences = [JSONText.quote("projects/" + projectNumber)]
        if let projectId { audiences.append(JSONText.quote("projects/" + projectId)) }
        let header = "{\"alg\":\"RS256\",\"kid\":\(JSONText.quote(keys.signer.kid)),\"typ\":\"JWT\"}"
        let claims = "{\"iss\":\(JSONText.quote(tokenIssuer)),\"sub\":\(JSONText.quote(app.appId))"
            + ",\"aud\":[\(audiences.joined(separator: ","))],\"iat\":\(now),\"exp\":\(now + ttl)"
            + ",\"jti\":\"\(jti)\",\"provider\":\(JSONText.quote(provider))" + (risk.map { ",\"risk\":\($0)" } ?? "")
            + IssuerDPoP.cnfMember + "}"
        do {
            return try TokenMinter.mintRaw(headerJSON: header, payloadJSON: claims, key: keys.signer.key)
        } catch {
            throw .unavailable("signing_failed")
        }
    }
}
