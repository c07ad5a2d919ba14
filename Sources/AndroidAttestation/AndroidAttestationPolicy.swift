/// What an app accepts from an Android attestation (the `android:` block of an issuer app, SPEC §10).
public struct AndroidAttestationPolicy: Sendable, Equatable {
    /// The package name the attestation application id must list.
    public var packageName: String
    /// SHA-256 digests (32 bytes each) of the app's signing certificates; one must be listed.
    public var signingCertificateDigests: [[UInt8]]
    /// Refuse keys and attestations in the TEE: StrongBox only. Default false.
    public var requireStrongBox: Bool
    /// The oldest `osPatchLevel` accepted, YYYYMM; `nil` (the default) does not check it.
    public var minimumPatchLevel: Int64?

    /// Makes a policy; see the properties.
    public init(packageName: String, signingCertificateDigests: [[UInt8]], requireStrongBox: Bool = false,
                minimumPatchLevel: Int64? = nil) {
        self.packageName = packageName
        self.signingCertificateDigests = signingCertificateDigests
        self.requireStrongBox = requireStrongBox
        self.minimumPatchLevel = minimumPatchLevel
    }
}
