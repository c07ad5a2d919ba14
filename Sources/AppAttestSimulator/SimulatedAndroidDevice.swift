/// A simulated Android phone: it generates Keystore keys with an attestation challenge under a
/// `SimulatedAndroidCA` (the chain `getCertificateChain` returns: leaf, intermediate, root) and signs
/// challenges with them, as the documented Kotlin provider does (docs/examples/android). Development and
/// tests only; keys live in memory.
public final class SimulatedAndroidDevice: Sendable {
    /// One generated key: its certificate chain and its private half.
    public final class Key: Sendable {
        private let key: SimulatorKey
        /// DER certificates, leaf first, root last.
        public let chain: [[UInt8]]

        init(key: SimulatorKey, chain: [[UInt8]]) {
            self.key = key
            self.chain = chain
        }

        /// DER ECDSA P-256 signature over `message` with SHA-256 (`Signature.getInstance("SHA256withECDSA")`).
        public func sign(_ message: [UInt8]) throws(SimulatorError) -> [UInt8] { try key.signSHA256(message) }
    }

    /// The PKI the device's keys chain to.
    public let ca: SimulatedAndroidCA
    /// The app's package name.
    public let packageName: String
    /// SHA-256 of the app's signing certificate.
    public let signingCertificateDigest: [UInt8]

    /// A device running `packageName` signed by a certificate whose SHA-256 is `signingCertificateDigest`.
    public init(ca: SimulatedAndroidCA, packageName: String, signingCertificateDigest: [UInt8]) {
        self.ca = ca
        self.packageName = packageName
        self.signingCertificateDigest = signingCertificateDigest
    }

    /// Generates a P-256 key attested with `challenge` at `now` (seconds since the Unix epoch), its KeyDescription
    /// built from `description` (valid by default).
    public func generateKey(challenge: [UInt8], now: Int64,
                            description: SimulatedKeyDescription = SimulatedKeyDescription()) throws(SimulatorError) -> Key {
        let key = try SimulatorKey(curve: "P-256")
        let value = description.der(challenge: challenge, packageName: packageName, signatureDigests: [signingCertificateDigest])
        let leaf = try ca.issueLeaf(spki: try key.spki(), keyDescription: value, notBefore: now - 60, notAfter: now + 365 * 86_400)
        return Key(key: key, chain: [leaf, ca.intermediateDER, ca.rootDER])
    }
}
