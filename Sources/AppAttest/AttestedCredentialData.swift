/// The attested credential data of an attestation's authenticator data.
public struct AttestedCredentialData: Sendable, Equatable {
    /// 16 bytes: `appattestdevelop` or `appattest` followed by seven zero bytes.
    public let aaguid: [UInt8]
    /// The credential ID; App Attest sets it to the key ID.
    public let credentialId: [UInt8]
    /// The COSE_Key map of the credential's public key (not checked: the certificate's key is authoritative).
    public let publicKey: CBORMap
}
