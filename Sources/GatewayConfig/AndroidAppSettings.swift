/// `issuer.apps[].android`: Android Key Attestation for this app (SPEC §10, docs/issuer.md "Android").
public struct AndroidAppSettings: Sendable {
    /// Google's attestation status list, the default `revocation_url`.
    public static let googleStatusURL = "https://android.googleapis.com/attestation/status"

    /// The app's package name (`applicationId`), which the attestation application id must list. Required.
    public var packageName: String
    /// SHA-256 digests (32 bytes each) of the certificates the app is signed with (with Play App Signing, the
    /// app signing key's, from the Play Console); one must be in the attestation. At least one.
    public var signingCertSHA256: [[UInt8]]
    /// Refuse keys kept in the TEE: StrongBox only. Default false.
    public var requireStrongBox = false
    /// The oldest OS patch level accepted, YYYYMM; nil (default) does not check it.
    public var minPatchLevel: Int64?
    /// A PEM file of root certificates replacing Google's two built-in roots (tests, demos); nil = Google's.
    public var rootCAFile: String?
    /// Where the attestation status list is fetched (`https://`, `http://` or `file://`); default Google's.
    public var revocationURL: String = AndroidAppSettings.googleStatusURL

    public init(packageName: String, signingCertSHA256: [[UInt8]]) {
        self.packageName = packageName
        self.signingCertSHA256 = signingCertSHA256
    }
}
