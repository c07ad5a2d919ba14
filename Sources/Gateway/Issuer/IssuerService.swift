import AppAttest
import AppCheck
import ReplayStores
import Foundation

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

    static func failure(_ error: IssuerError, appId: String, method: String) -> IssuerOutcome {
        IssuerOutcome(status: error.code, body: error.body, appId: appId, method: method, result: error.metricResult,
                      rule: error.rule)
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
    let state: IssuerState
    let limiter: ExchangeRateLimiter
    let clock: @Sendable () -> Double
    private let debugSecrets: [String: DebugSecrets]
    /// One App Attest verifier per app with `app_attest`, trusting Apple's root or the app's `root_ca_file`.
    private let verifiers: [String: AppAttestVerifier]

    /// Throws when an app's `root_ca_file` cannot be read or holds no certificate.
    public init(settings: IssuerSettings, projectNumber: String, projectId: String?, keys: IssuerKeys,
                state: IssuerState, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) throws {
        self.settings = settings
        self.projectNumber = projectNumber
        self.projectId = projectId
        self.keys = keys
        self.state = state
        self.clock = clock
        limiter = ExchangeRateLimiter(ratePerSecond: settings.maxExchangesPerSecond, now: clock())
        debugSecrets = Dictionary(settings.apps.map { ($0.appId, DebugSecrets($0.debugSecrets)) }, uniquingKeysWith: { a, _ in a })
        var verifiers: [String: AppAttestVerifier] = [:]
        for app in settings.apps {
            guard let attest = app.appAttest else { continue }
            let pem = try attest.rootCAFile.map { try String(contentsOfFile: $0, encoding: .utf8) } ?? AppAttestRootCA.applePEM
            verifiers[app.appId] = try AppAttestVerifier(rootCertificatePEM: pem)
        }
        self.verifiers = verifiers
    }

    /// `iss` of the tokens minted here.
    public var tokenIssuer: String { settings.tokenIssuer(projectNumber: projectNumber) }

    /// Answers one call. `httpMethod` is the request method (`GET` for the key set, `POST` for the rest).
    public func handle(_ path: IssuerPath, httpMethod: String, body: [UInt8]) async -> IssuerOutcome {
        switch path {
        case .jwks:
            guard httpMethod == "GET" || httpMethod == "HEAD" else {
                return .failure(.notFound("jwks_not_get", "The key set is read with GET."), appId: "", method: "jwks")
            }
            return IssuerOutcome(status: 200, body: keys.document, headers: [("Cache-Control", "public, max-age=3600")],
                                 appId: "", method: "jwks", result: "jwks", rule: "")
        case let .unknown(rule):
            return .failure(.notFound(rule, "No such method."), appId: "", method: "unknown")
        case let .method(project, appId, method):
            do {
                return try await call(method, project: project, appId: appId, httpMethod: httpMethod, body: body)
            } catch {
                return .failure(error, appId: appId, method: method.rawValue)
            }
        }
    }

    private func call(_ method: IssuerMethod, project: String, appId: String, httpMethod: String,
                      body: [UInt8]) async throws(IssuerError) -> IssuerOutcome {
        guard httpMethod == "POST" else { throw .notFound("method_not_post", "Exchange methods are called with POST.") }
        guard project == projectNumber || (projectId != nil && project == projectId) else {
            throw .notFound("unknown_project", "No such project.")
        }
        guard let app = settings.app(appId) else { throw .notFound("unknown_app", "No such app.") }
        guard app.methods.contains(method.rawValue) else { throw .notFound("method_not_enabled", "No such method for this app.") }
        // Cheap refusals come before anything that costs CPU or a store round trip (docs/issuer.md limits).
        guard body.count <= IssuerJSON.maxBodyBytes else { throw .bodyTooLarge }
        guard limiter.admit(now: clock()) else { throw .rateLimited }
        let json = try IssuerJSON(body: body)

        switch method {
        case .generateAppAttestChallenge:
            return try await challenge(app)
        case .exchangeDebugToken:
            let presented = try json.string("debug_token")
            let limitedUse = try json.limitedUse()
            guard debugSecrets[app.appId]?.matches(presented) == true else { throw .permissionDenied("debug_secret_unknown") }
            return try mintOutcome(app, method: method, limitedUse: limitedUse)
        case .exchangeAppAttestAttestation:
            return try await attestation(app, json)
        case .exchangeAppAttestAssertion:
            return try await assertion(app, json)
        case .exchangeDeviceCheckToken, .exchangeCustomToken:
            // DeviceCheck and custom tokens come with their own issue; no app can enable them yet.
            throw .notFound("method_not_available", "No such method for this app.")
        }
    }

    /// `generateAppAttestChallenge`: 32 random bytes, single use, bound to the app, `challenge_ttl`.
    private func challenge(_ app: IssuerAppSettings) async throws(IssuerError) -> IssuerOutcome {
        var generator = SystemRandomNumberGenerator()
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let now = clock()
        do {
            try await state.putChallenge(challenge, appId: app.appId, now: now, expiresAt: now + settings.challengeTTL)
        } catch {
            throw .unavailable("state_unavailable")
        }
        return IssuerOutcome(status: 200, body: IssuerResponse.challenge(challenge, ttl: Int(settings.challengeTTL)),
                             appId: app.appId, method: IssuerMethod.generateAppAttestChallenge.rawValue,
                             result: "challenge", rule: "")
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
        let key = AttestedKey(keyId: verified.keyId, appId: app.appId, publicKey: verified.publicKey.uncompressedPoint,
                              counter: 0, environment: verified.environment.rawValue, receipt: verified.receipt,
                              attestedAt: now)
        let stored: Bool
        do { stored = try await state.insertKey(key) } catch { throw .unavailable("state_unavailable") }
        guard stored else { throw .permissionDenied("key_already_attested") }
        let ttl = ttl(app, limitedUse: limitedUse)
        let token = try mint(app, provider: "app_attest", ttl: ttl)
        return IssuerOutcome(status: 200, body: IssuerResponse.attestation(artifact: verified.keyId, token: token, ttl: ttl),
                             appId: app.appId, method: IssuerMethod.exchangeAppAttestAttestation.rawValue,
                             result: "minted", rule: "")
    }

    /// `exchangeAppAttestAssertion`: the challenge is used up, the artifact names a stored key of this app, the
    /// signature verifies over SHA-256(authenticatorData ‖ SHA-256(artifact ‖ challenge)), and the counter
    /// advances with one compare-and-set, so two assertions with the same counter never both mint.
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
        guard let stored else { throw .permissionDenied("unknown_artifact") }
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
        let advanced: Bool
        do { advanced = try await state.advanceCounter(artifact, appId: app.appId, to: verified.counter) } catch {
            throw .unavailable("state_unavailable")
        }
        guard advanced else { throw .permissionDenied(AppAttestRule.counterNotIncreasing.rawValue) }
        return try mintOutcome(app, method: .exchangeAppAttestAssertion, limitedUse: limitedUse)
    }

    /// Takes the challenge (single use, bound to the app, within `challenge_ttl`) or refuses.
    private func useChallenge(_ challenge: [UInt8], _ app: IssuerAppSettings) async throws(IssuerError) {
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

    private func mintOutcome(_ app: IssuerAppSettings, method: IssuerMethod, limitedUse: Bool) throws(IssuerError) -> IssuerOutcome {
        let ttl = ttl(app, limitedUse: limitedUse)
        let token = try mint(app, provider: method.provider ?? "unspecified", ttl: ttl)
        return IssuerOutcome(status: 200, body: IssuerResponse.token(token, ttl: ttl), appId: app.appId,
                             method: method.rawValue, result: "minted", rule: "")
    }

    /// A token per docs/issuer.md "Minted tokens": header `{"alg":"RS256","kid","typ":"JWT"}`; claims `iss`, `sub`,
    /// `aud` (number, then ID when set), `iat`, `exp`, `jti` (128 random bits, always) and `provider`.
    func mint(_ app: IssuerAppSettings, provider: String, ttl: Int) throws(IssuerError) -> String {
        let now = Int(clock())
        var generator = SystemRandomNumberGenerator()
        let jti = Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        var audiences = [JSONText.quote("projects/" + projectNumber)]
        if let projectId { audiences.append(JSONText.quote("projects/" + projectId)) }
        let header = "{\"alg\":\"RS256\",\"kid\":\(JSONText.quote(keys.signer.kid)),\"typ\":\"JWT\"}"
        let claims = "{\"iss\":\(JSONText.quote(tokenIssuer)),\"sub\":\(JSONText.quote(app.appId))"
            + ",\"aud\":[\(audiences.joined(separator: ","))],\"iat\":\(now),\"exp\":\(now + ttl)"
            + ",\"jti\":\"\(jti)\",\"provider\":\(JSONText.quote(provider))}"
        do {
            return try TokenMinter.mintRaw(headerJSON: header, payloadJSON: claims, key: keys.signer.key)
        } catch {
            throw .unavailable("signing_failed")
        }
    }
}
