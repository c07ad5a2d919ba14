/// An Apple App ID, `<team_id>.<bundle_id>`, whose SHA-256 is the rpIdHash of App Attest authenticator data.
public struct AppAttestAppID: Sendable, Hashable {
    /// The ten-character Apple team ID.
    public let teamId: String
    /// The bundle identifier.
    public let bundleId: String

    /// Makes an App ID; no format check (the config layer validates).
    public init(teamId: String, bundleId: String) {
        self.teamId = teamId
        self.bundleId = bundleId
    }

    /// `<team_id>.<bundle_id>`.
    public var string: String { teamId + "." + bundleId }

    /// SHA-256 of the UTF-8 of `string`.
    public var rpIdHash: [UInt8] { Digest.sha256(Array(string.utf8)) }
}
