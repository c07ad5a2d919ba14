/// A verified App Attest attestation: what the issuer stores for the key (docs/issuer.md).
public struct AppAttestAttestation: Sendable, Equatable {
    /// The key ID (SHA-256 of the public key's uncompressed point), 32 bytes.
    public let keyId: [UInt8]
    /// The attested public key; `uncompressedPoint` (65 bytes) or `spkiDER` (91 bytes) is what to store.
    public let publicKey: AppAttestPublicKey
    /// The environment told by the AAGUID (already checked against the allowed set).
    public let environment: AppAttestEnvironment
    /// `attStmt.receipt`: Apple's PKCS#7 receipt, kept for a later risk-metric refresh; not verified here.
    public let receipt: [UInt8]
    /// The authenticator data's extensions map (iOS 27 and later), if any.
    public let extensions: CBORMap?
}
