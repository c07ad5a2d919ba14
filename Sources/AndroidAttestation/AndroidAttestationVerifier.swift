/// Verifies Android Key Attestation certificate chains (SPEC §10 "Android Key Attestation", docs/issuer.md
/// "Android"). Pure: the time and the status list are passed in, no I/O, no logging; each refusal names its
/// `AndroidAttestationRule`.
///
/// Immutable and safe to share between threads; build one per set of trusted roots and reuse it.
public struct AndroidAttestationVerifier: Sendable {
    private let trust: AndroidTrustStore

    /// Most certificates in a presented chain, root included (real ones have 3 to 5).
    public static let maxChainLength = 8

    /// A verifier trusting every certificate of `rootsPEM` (default: Google's two roots, built in). Throws
    /// `.chainUntrusted` when the PEM holds no certificate.
    public init(rootsPEM: String = AndroidRootCA.googlePEM) throws(AndroidAttestationFailure) {
        guard let trust = AndroidTrustStore(rootsPEM: rootsPEM) else {
            throw AndroidAttestationFailure(.chainUntrusted, "the root CA PEM holds no certificate")
        }
        self.trust = trust
    }

    /// Verifies `chain` (DER certificates, leaf first; the root may be included or not) for `challenge` and
    /// `policy` at `time` (seconds since the Unix epoch), with `statusList` as the current status list.
    ///
    /// Rules, in order, the first failure wins: the chain's shape (1 to `maxChainLength` DER certificates); the
    /// chain verifies to a pinned root at `time` (a presented self-signed top certificate is set aside: trust
    /// comes from the store, which holds the same key); no presented serial is REVOKED or SUSPENDED; exactly one
    /// certificate carries a KeyDescription, once, and it is the leaf (a second higher up is refused); it parses
    /// strictly; origin GENERATED (hardware-enforced); the challenge; both security levels TrustedEnvironment or StrongBox
    /// (StrongBox only with `policy.requireStrongBox`); the hardware-enforced root of trust is locked and
    /// Verified; the attestation application id lists `policy.packageName` and one of its digests; the hardware-enforced
    /// OS patch level is at least `policy.minimumPatchLevel` when set; the leaf key is EC P-256.
    public func verify(chain: [[UInt8]], challenge: [UInt8], policy: AndroidAttestationPolicy,
                       statusList: AndroidStatusList, at time: Int64) throws(AndroidAttestationFailure) -> AndroidAttestedKey {
        guard !chain.isEmpty, chain.count <= Self.maxChainLength else {
            throw AndroidAttestationFailure(.chainMalformed, "chain holds \(chain.count) certificates, not 1 to \(Self.maxChainLength)")
        }
        var certificates: [AndroidCertificate] = []
        for (index, der) in chain.enumerated() {
            guard let certificate = AndroidCertificate(der: der) else {
                throw AndroidAttestationFailure(.chainMalformed, "certificate \(index) is not one DER X.509 certificate")
            }
            certificates.append(certificate)
        }

        var path = certificates
        if path.count > 1, let top = path.last, top.isSelfSigned { path.removeLast() }
        if let reason = trust.verify(path, at: time) { throw AndroidAttestationFailure(.chainUntrusted, reason) }

        for (index, certificate) in certificates.enumerated() {
            guard let serial = certificate.serialHex() else {
                throw AndroidAttestationFailure(.chainMalformed, "certificate \(index) has no readable serial")
            }
            switch statusList.status(ofSerial: serial) {
            case .revoked?: throw AndroidAttestationFailure(.certificateRevoked, "certificate \(index) (serial \(serial)) is REVOKED")
            case .suspended?: throw AndroidAttestationFailure(.certificateSuspended, "certificate \(index) (serial \(serial)) is SUSPENDED")
            case nil: break
            }
        }

        let description = try Self.keyDescription(of: certificates)

        let hardware = description.hardwareEnforced
        // Origin, root of trust and patch level are read from the hardware-enforced list only: the software one is the
        // OS's word, which is what the attestation is meant to check.
        guard hardware.origin == AuthorizationList.originGenerated else {
            throw AndroidAttestationFailure(.origin, "hardware-enforced origin is not GENERATED")
        }
        guard description.attestationChallenge == challenge else {
            throw AndroidAttestationFailure(.challenge, "attestationChallenge is not the challenge")
        }
        for (name, level) in [("attestation", description.attestationSecurityLevel), ("keyMint", description.keyMintSecurityLevel)] {
            switch level {
            case .software: throw AndroidAttestationFailure(.securityLevel, "\(name) security level is Software")
            case .trustedEnvironment where policy.requireStrongBox:
                throw AndroidAttestationFailure(.strongBoxRequired, "\(name) security level is TrustedEnvironment, StrongBox required")
            case .trustedEnvironment, .strongBox: break
            }
        }
        guard let rootOfTrust = hardware.rootOfTrust else {
            throw AndroidAttestationFailure(.deviceUnlocked, "no hardware-enforced root of trust")
        }
        guard rootOfTrust.deviceLocked else { throw AndroidAttestationFailure(.deviceUnlocked, "the bootloader is unlocked") }
        guard rootOfTrust.verifiedBootState == .verified else {
            throw AndroidAttestationFailure(.bootNotVerified, "verified boot state is \(rootOfTrust.verifiedBootState)")
        }
        guard let application = description.attestationApplicationID,
              application.packages.contains(where: { $0.name == Array(policy.packageName.utf8) }) else {
            throw AndroidAttestationFailure(.packageName, "the attestation application id does not list the package")
        }
        guard application.signatureDigests.contains(where: { policy.signingCertificateDigests.contains($0) }) else {
            throw AndroidAttestationFailure(.signingCertificate, "no signing certificate digest is the app's")
        }
        if let minimum = policy.minimumPatchLevel {
            guard let level = hardware.osPatchLevel else {
                throw AndroidAttestationFailure(.patchLevel, "no osPatchLevel, \(minimum) required")
            }
            guard level >= minimum else {
                throw AndroidAttestationFailure(.patchLevel, "osPatchLevel \(level) is older than \(minimum)")
            }
        }
        guard let spki = certificates[0].publicKeySPKI(), let point = Self.p256Point(spki: spki) else {
            throw AndroidAttestationFailure(.attestedKey, "the attested key is not EC P-256")
        }
        return AndroidAttestedKey(uncompressedPoint: point, keyDescription: description)
    }

    /// The KeyDescription of the chain: the first certificate from the leaf that carries one must be the leaf,
    /// carry it once, and be the only one.
    static func keyDescription(of certificates: [AndroidCertificate]) throws(AndroidAttestationFailure) -> KeyDescription {
        var found: (index: Int, value: [UInt8])? = nil
        for (index, certificate) in certificates.enumerated() {
            let values = certificate.extensionValues(oid: KeyDescription.oid)
            if values.isEmpty { continue }
            guard found == nil else {
                throw AndroidAttestationFailure(.keyDescriptionRepeated, "certificate \(index) carries a second KeyDescription")
            }
            guard values.count == 1 else {
                throw AndroidAttestationFailure(.keyDescriptionMissing, "certificate \(index) carries the KeyDescription \(values.count) times")
            }
            found = (index, values[0])
        }
        guard let found else { throw AndroidAttestationFailure(.keyDescriptionMissing, "no certificate carries a KeyDescription") }
        guard found.index == 0 else {
            throw AndroidAttestationFailure(.keyDescriptionNotLeaf, "the KeyDescription is in certificate \(found.index), not the leaf")
        }
        do { return try KeyDescription(der: found.value) } catch {
            throw AndroidAttestationFailure(.keyDescriptionMalformed, "KeyDescription: \(error)")
        }
    }

    /// The DER prefix of a P-256 SubjectPublicKeyInfo (id-ecPublicKey, prime256v1, a 66-byte BIT STRING).
    static let p256SPKIPrefix: [UInt8] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                                          0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00]

    /// The uncompressed point of a P-256 SPKI as OpenSSL re-encodes it, `nil` for any other key.
    static func p256Point(spki: [UInt8]) -> [UInt8]? {
        guard spki.count == 91, Array(spki[0..<26]) == p256SPKIPrefix, spki[26] == 0x04 else { return nil }
        return Array(spki[26...])
    }
}
