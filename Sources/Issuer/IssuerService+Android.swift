import AndroidAttestation
import AppAttest
import AppCheck
import GatewayConfig
import ReplayStores

/// Android Key Attestation (SPEC §10, docs/issuer.md "Android"): the Android counterpart of App Attest, with no
/// Google service in the path but the status list.
extension IssuerService {
    /// `exchangeAndroidKeyAttestation`: the fields are read (400), the status list must be younger than 24 h (503,
    /// before the challenge is touched, so the client may retry with it), the challenge is used up, the chain is
    /// verified by `AndroidAttestationVerifier` in SPEC §10's order, the attested key is stored like an App Attest
    /// key (counter 0) and a token minted. The artifact is SHA-256 of the key's uncompressed point.
    func androidAttestation(_ app: IssuerAppSettings, _ json: IssuerJSON) async throws(IssuerError) -> IssuerOutcome {
        let chain = try Self.certificateChain(json)
        let challenge = try json.bytes("challenge", maxBytes: 1024)
        let limitedUse = try json.limitedUse()
        guard let android = androidApps[app.appId] else { throw .notFound("method_not_enabled", "No such method for this app.") }
        let statusList: AndroidStatusList
        switch android.statusList.list(now: clock()) {
        case let .success(list): statusList = list
        case let .failure(stale): throw .unavailable("android_status_list_stale", detail: stale.reason)
        }
        try await useChallenge(challenge, app)
        let now = clock()
        let attested: AndroidAttestedKey
        do {
            attested = try android.verifier.verify(chain: chain, challenge: challenge, policy: android.policy,
                                                   statusList: statusList, at: Int64(now))
        } catch {
            throw error.rule == .chainMalformed
                ? .invalidArgument(error.rule.rawValue, "The attestation evidence is malformed.")
                : .permissionDenied(error.rule.rawValue, detail: error.detail)
        }
        guard let publicKey = AppAttestPublicKey(uncompressedPoint: attested.uncompressedPoint) else {
            throw .permissionDenied(AndroidAttestationRule.attestedKey.rawValue)
        }
        let key = AttestedKey(keyId: publicKey.keyId, appId: app.appId, publicKey: publicKey.uncompressedPoint, counter: 0,
                              environment: AndroidKeyApps.environment, receipt: [], attestedAt: now)
        let stored: Bool
        do { stored = try await state.insertKey(key) } catch { throw .unavailable("state_unavailable") }
        guard stored else { throw .permissionDenied("key_already_attested") }
        let ttl = ttl(app, limitedUse: limitedUse)
        let token = try mint(app, provider: MintedTokenProvider.androidKey.rawValue, ttl: ttl)
        return IssuerOutcome(status: 200, body: IssuerResponse.attestation(artifact: key.keyId, token: token, ttl: ttl),
                             appId: app.appId, method: IssuerMethod.exchangeAndroidKeyAttestation.rawValue,
                             result: "minted", rule: "")
    }

    /// `exchangeAndroidKeyAssertion`: the challenge is used up, the artifact (`key_id` is accepted too) names an
    /// Android key of this app, and `signature` (DER ECDSA P-256) verifies over the challenge with SHA-256. The
    /// single-use challenge is what keeps a signature from passing twice.
    func androidAssertion(_ app: IssuerAppSettings, _ json: IssuerJSON) async throws(IssuerError) -> IssuerOutcome {
        let artifact = try json.bytes("artifact", aliases: ["key_id", "keyId"], maxBytes: 64)
        let challenge = try json.bytes("challenge", maxBytes: 1024)
        let signature = try json.bytes("signature", maxBytes: 72)
        let limitedUse = try json.limitedUse()
        guard androidApps[app.appId] != nil else { throw .notFound("method_not_enabled", "No such method for this app.") }
        try await useChallenge(challenge, app)
        let stored: AttestedKey?
        do { stored = try await state.key(artifact, appId: app.appId) } catch { throw .unavailable("state_unavailable") }
        guard let stored, stored.environment == AndroidKeyApps.environment else { throw .permissionDenied("unknown_artifact") }
        guard let publicKey = AppAttestPublicKey(uncompressedPoint: stored.publicKey) else {
            throw .permissionDenied("android_stored_key")
        }
        guard publicKey.verifyECDSASHA256(signature: signature, message: challenge) else {
            throw .permissionDenied("android_signature")
        }
        return try mintOutcome(app, method: .exchangeAndroidKeyAssertion, limitedUse: limitedUse)
    }

    /// `certificate_chain`: an array of 1 to `AndroidAttestationVerifier.maxChainLength` base64 DER certificates,
    /// leaf first; anything else is 400.
    static func certificateChain(_ json: IssuerJSON) throws(IssuerError) -> [[UInt8]] {
        guard let value = try json.field("certificate_chain") else {
            throw .invalidArgument("missing_certificate_chain", "Field certificate_chain is required.")
        }
        guard let items = value.arrayValue, !items.isEmpty else {
            throw .invalidArgument("invalid_certificate_chain", "Field certificate_chain must be a non-empty array of base64 certificates.")
        }
        guard items.count <= AndroidAttestationVerifier.maxChainLength else {
            throw .invalidArgument(AndroidAttestationRule.chainMalformed.rawValue, "The attestation evidence is malformed.")
        }
        var chain: [[UInt8]] = []
        for item in items {
            guard let text = item.stringValue, let der = IssuerJSON.decodeBase64(text), !der.isEmpty,
                  der.count <= AndroidKeyApps.maxCertificateBytes else {
                throw .invalidArgument("invalid_base64_certificate_chain", "Field certificate_chain must hold base64 certificates.")
            }
            chain.append(der)
        }
        return chain
    }
}
