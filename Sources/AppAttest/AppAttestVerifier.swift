/// Verifies App Attest attestations and assertions (Apple's "Validating apps that connect to your server",
/// docs/issuer.md). Pure: the time is passed in, no I/O, no logging; each refusal names its `AppAttestRule`.
///
/// Immutable and safe to share between threads; build one per trusted root and reuse it.
public struct AppAttestVerifier: Sendable {
    private let trust: AppAttestTrustStore

    /// `attStmt.receipt` larger than this is refused as malformed (Apple's are about 3–4 KB).
    public static let maxReceiptLength = 32_768

    /// A verifier trusting only `rootCertificatePEM` (default: Apple's App Attestation Root CA, built in).
    /// Throws `.certificateChain` when the PEM holds no certificate.
    public init(rootCertificatePEM: String = AppAttestRootCA.applePEM) throws(AppAttestFailure) {
        guard let trust = AppAttestTrustStore(rootPEM: rootCertificatePEM) else {
            throw AppAttestFailure(.certificateChain, "the root CA PEM holds no certificate")
        }
        self.trust = trust
    }

    /// The attestation's clientDataHash for a Firebase-compatible client: SHA-256 of the challenge bytes.
    public static func clientDataHash(challenge: [UInt8]) -> [UInt8] { Digest.sha256(challenge) }

    /// Verifies an attestation object (`{fmt, attStmt: {x5c, receipt}, authData}`) for the key `keyId`.
    ///
    /// First the shape (CBOR, fields, authenticator data, certificate DER: `malformed`, and `fmt`, the
    /// certificate count), so no chain is verified for junk; then Apple's order: chain at `time`
    /// (seconds since the Unix epoch), nonce = SHA-256(authData ‖ `clientDataHash`) against the leaf's
    /// `1.2.840.113635.100.8.2` extension, key ID, rpIdHash of `appId`, counter 0, AAGUID within
    /// `environments`, credential ID = key ID. Unknown extra members of the object are ignored.
    public func verifyAttestation(_ object: [UInt8], keyId: [UInt8], clientDataHash: [UInt8], appId: AppAttestAppID,
                                  environments: Set<AppAttestEnvironment>, at time: Int64) throws(AppAttestFailure) -> AppAttestAttestation {
        let top: CBORValue
        do { top = try CBORDecoder.decode(object) } catch { throw AppAttestFailure(.malformed, "attestation CBOR: \(error)") }
        guard let map = top.mapValue, let fmt = map[text: "fmt"]?.textValue else {
            throw AppAttestFailure(.malformed, "attestation has no text fmt")
        }
        guard fmt == "apple-appattest" else { throw AppAttestFailure(.format, "fmt is not apple-appattest") }
        guard let statement = map[text: "attStmt"]?.mapValue, let x5c = statement[text: "x5c"]?.arrayValue,
              let authDataBytes = map[text: "authData"]?.bytesValue else {
            throw AppAttestFailure(.malformed, "attestation lacks attStmt.x5c or authData of the right types")
        }
        // An absent receipt is an empty one (docs/issuer.md, Fraud risk): the receipt feeds only the risk metric, so
        // either is accepted, kept as none and logged `receipt_missing`; a receipt of the wrong type is malformed.
        var receipt: [UInt8] = []
        if let value = statement[text: "receipt"] {
            guard let bytes = value.bytesValue else { throw AppAttestFailure(.malformed, "attStmt.receipt is not a byte string") }
            receipt = bytes
        }
        guard receipt.count <= Self.maxReceiptLength else { throw AppAttestFailure(.malformed, "receipt too large") }
        let certificates = x5c.compactMap(\.bytesValue)
        guard certificates.count == x5c.count else { throw AppAttestFailure(.malformed, "x5c holds a non-byte-string") }
        guard certificates.count == 2 else {
            throw AppAttestFailure(.certificateCount, "x5c holds \(certificates.count) certificates, not 2")
        }
        let authData: AuthenticatorData
        do { authData = try AuthenticatorData(authDataBytes, kind: .attestation) } catch {
            throw AppAttestFailure(.malformed, "authenticator data: \(error)")
        }
        guard let leaf = X509Certificate(der: certificates[0]), let intermediate = X509Certificate(der: certificates[1]) else {
            throw AppAttestFailure(.certificateChain, "a certificate is not one DER X.509 certificate")
        }

        if let reason = trust.verify(leaf: leaf, intermediate: intermediate, at: time) {
            throw AppAttestFailure(.certificateChain, reason)
        }

        guard clientDataHash.count <= 1024 else { throw AppAttestFailure(.nonce, "clientDataHash too long") }
        let nonce = Digest.sha256(authDataBytes + clientDataHash)
        guard let extensionValue = leaf.extensionValue(oid: "1.2.840.113635.100.8.2") else {
            throw AppAttestFailure(.nonce, "leaf has no single nonce extension")
        }
        guard let certified = Self.nonce(fromExtension: extensionValue) else {
            throw AppAttestFailure(.nonce, "nonce extension is not SEQUENCE { [1] OCTET STRING(32) }")
        }
        guard Digest.constantTimeEqual(certified, nonce) else { throw AppAttestFailure(.nonce, "nonce differs") }

        guard let spki = leaf.publicKeySPKI(), let publicKey = AppAttestPublicKey(spki: spki) else {
            throw AppAttestFailure(.keyId, "leaf key is not an uncompressed P-256 point")
        }
        let computedKeyId = publicKey.keyId
        guard Digest.constantTimeEqual(computedKeyId, keyId) else { throw AppAttestFailure(.keyId, "key ID differs") }

        guard Digest.constantTimeEqual(authData.rpIdHash, appId.rpIdHash) else {
            throw AppAttestFailure(.rpIdHash, "rpIdHash is not SHA-256 of the App ID")
        }
        guard authData.counter == 0 else { throw AppAttestFailure(.counter, "counter is \(authData.counter), not 0") }
        guard let credential = authData.credential else { throw AppAttestFailure(.malformed, "no attested credential data") }
        guard let environment = AppAttestEnvironment(aaguid: credential.aaguid) else {
            throw AppAttestFailure(.aaguid, "AAGUID is not an App Attest value")
        }
        guard environments.contains(environment) else {
            throw AppAttestFailure(.environment, "environment \(environment.rawValue) is not allowed")
        }
        guard Digest.constantTimeEqual(credential.credentialId, computedKeyId) else {
            throw AppAttestFailure(.credentialId, "credential ID is not the key ID")
        }
        return AppAttestAttestation(keyId: computedKeyId, publicKey: publicKey, environment: environment,
                                    receipt: receipt, extensions: authData.extensions)
    }

    /// Verifies an assertion object (`{signature, authenticatorData}`, nothing else) made by `publicKey`
    /// over `clientData` (for the Firebase protocol: artifact ‖ challenge, docs/issuer.md).
    ///
    /// clientDataHash = SHA-256(clientData); the DER ECDSA P-256 signature must verify with SHA-256 over
    /// nonce = SHA-256(authenticatorData ‖ clientDataHash) (so the signed digest is SHA-256(nonce), as every
    /// real device does); rpIdHash = SHA-256 of `appId`. The counter is returned, not judged: the caller
    /// applies `AppAttestCounter` with its atomic compare-and-set.
    public func verifyAssertion(_ object: [UInt8], clientData: [UInt8], publicKey: AppAttestPublicKey,
                                appId: AppAttestAppID) throws(AppAttestFailure) -> AppAttestAssertion {
        let top: CBORValue
        do { top = try CBORDecoder.decode(object) } catch { throw AppAttestFailure(.malformed, "assertion CBOR: \(error)") }
        guard let map = top.mapValue, map.entries.count == 2, let signature = map[text: "signature"]?.bytesValue,
              let authDataBytes = map[text: "authenticatorData"]?.bytesValue else {
            throw AppAttestFailure(.malformed, "assertion is not exactly {signature, authenticatorData} byte strings")
        }
        let authData: AuthenticatorData
        do { authData = try AuthenticatorData(authDataBytes, kind: .assertion) } catch {
            throw AppAttestFailure(.malformed, "authenticator data: \(error)")
        }
        let nonce = Digest.sha256(authDataBytes + Digest.sha256(clientData))
        guard publicKey.verifyECDSASHA256(signature: signature, message: nonce) else {
            throw AppAttestFailure(.signature, "signature does not verify with the stored key")
        }
        guard Digest.constantTimeEqual(authData.rpIdHash, appId.rpIdHash) else {
            throw AppAttestFailure(.rpIdHash, "rpIdHash is not SHA-256 of the App ID")
        }
        return AppAttestAssertion(counter: authData.counter, extensions: authData.extensions)
    }

    /// The 32-byte nonce of the extension value, which must be exactly
    /// `30 24 A1 22 04 20 ‖ nonce` (DER SEQUENCE { [1] EXPLICIT OCTET STRING(32) }) with nothing after it.
    static func nonce(fromExtension value: [UInt8]) -> [UInt8]? {
        let prefix: [UInt8] = [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20]
        guard value.count == 38, Array(value[0..<6]) == prefix else { return nil }
        return Array(value[6...])
    }
}
