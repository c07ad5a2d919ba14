/// The version `appcheck-gateway --version` prints. Bumped by hand at each release (the container tags its
/// image with it); `-dev` marks a build from an unreleased checkout.
enum GatewayVersion {
    static let string = "0.1.0-dev"
}
