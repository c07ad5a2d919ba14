import COpenSSL
import Synchronization

/// A stand-in for Google's attestation PKI, made fresh in memory: a self-signed P-384 root and a P-384
/// intermediate (as on RKP devices), both valid from `now - 1 day` for 20 years, and P-256 leaves carrying a
/// KeyDescription (OID 1.3.6.1.4.1.11129.2.1.17). A gateway with `android.root_ca_file` = `rootPEM` accepts its
/// chains. Development and tests only.
public final class SimulatedAndroidCA: @unchecked Sendable {
    private let rootKey: SimulatorKey
    private let intermediateKey: SimulatorKey
    private let root: OpaquePointer
    private let intermediate: OpaquePointer
    private let lastSerial = Mutex<Int>(0x0100_0000)

    /// The root certificate in PEM, for `root_ca_file`.
    public let rootPEM: String
    /// The root certificate in DER.
    public let rootDER: [UInt8]
    /// The intermediate certificate in DER.
    public let intermediateDER: [UInt8]
    /// The intermediate's serial as the status list keys it (lowercase hex, no leading zeros).
    public let intermediateSerialHex = "7e57ca01"

    /// The KeyDescription OID.
    static let keyDescriptionOID = "1.3.6.1.4.1.11129.2.1.17"

    /// Makes a root and an intermediate valid from `now - 86400` (seconds since the Unix epoch) for 20 years.
    /// `intermediateKeyDescription` puts that extension value in the intermediate too (which must be refused).
    public init(now: Int64, intermediateKeyDescription: [UInt8]? = nil) throws(SimulatorError) {
        rootKey = try SimulatorKey(curve: "P-384")
        intermediateKey = try SimulatorKey(curve: "P-384")
        let notBefore = now - 86_400, notAfter = now + 20 * 365 * 86_400
        root = try SimulatedAppAttestCA.certificate(commonName: "Simulated Key Attestation Root", serial: 1, subjectKey: rootKey,
                                                    issuer: nil, issuerKey: rootKey, notBefore: notBefore, notAfter: notAfter,
                                                    isCA: true, extensions: [])
        intermediate = try SimulatedAppAttestCA.certificate(
            commonName: "Simulated Droid CA", serial: 0x7E57_CA01, subjectKey: intermediateKey, issuer: root, issuerKey: rootKey,
            notBefore: notBefore, notAfter: notAfter, isCA: true,
            extensions: intermediateKeyDescription.map { [(Self.keyDescriptionOID, $0)] } ?? [])
        rootDER = try SimulatedAppAttestCA.der(root)
        intermediateDER = try SimulatedAppAttestCA.der(intermediate)
        rootPEM = SimulatedAppAttestCA.pem(rootDER)
    }

    deinit {
        X509_free(root)
        X509_free(intermediate)
    }

    /// A leaf ("Android Keystore Key") for the key `spki` carrying `keyDescription` (or no extension when
    /// `nil`), signed by the intermediate.
    public func issueLeaf(spki: [UInt8], keyDescription: [UInt8]?, notBefore: Int64, notAfter: Int64) throws(SimulatorError) -> [UInt8] {
        let key: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key else { ERR_clear_error(); throw SimulatorError("d2i_PUBKEY") }
        defer { EVP_PKEY_free(key) }
        let serial = lastSerial.withLock { value -> Int in value += 1; return value }
        let leaf = try SimulatedAppAttestCA.certificate(
            commonName: "Android Keystore Key", serial: serial, subjectPublicKey: key, issuer: intermediate,
            issuerKey: intermediateKey, notBefore: notBefore, notAfter: notAfter, isCA: false,
            extensions: keyDescription.map { [(Self.keyDescriptionOID, $0)] } ?? [])
        defer { X509_free(leaf) }
        return try SimulatedAppAttestCA.der(leaf)
    }
}
