/// The App Attest environment a key was made in, told by the AAGUID of its attestation.
public enum AppAttestEnvironment: String, Sendable, Hashable, CaseIterable {
    /// AAGUID `appattest` followed by seven zero bytes: App Store, TestFlight and Enterprise builds.
    case production
    /// AAGUID `appattestdevelop`: development-signed builds with the development entitlement (or none).
    case development

    /// The 16-byte AAGUID Apple writes for this environment.
    public var aaguid: [UInt8] {
        switch self {
        case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
        case .development: Array("appattestdevelop".utf8)
        }
    }

    /// The environment whose AAGUID is `aaguid`, else `nil`.
    public init?(aaguid: [UInt8]) {
        guard let match = Self.allCases.first(where: { $0.aaguid == aaguid }) else { return nil }
        self = match
    }
}
