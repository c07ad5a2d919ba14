/// Where an issuer request goes (docs/issuer.md): `<base>/v1/jwks`, or
/// `<base>/v1/projects/{project}/apps/{app_id}:{method}`. Matched on the normalised path, before routes.
public enum IssuerPath: Equatable, Sendable {
    /// `GET <base>/v1/jwks`.
    case jwks
    /// A `projects.apps` method call.
    case method(project: String, appId: String, method: IssuerMethod)
    /// Under `<base>/v1/` but no such resource or method (404 `NOT_FOUND`); `rule` says why.
    case unknown(rule: String)

    /// nil when `path` is not under `<basePath>/v1/` at all (the request goes on to route matching).
    public static func match(_ path: Substring, basePath: String) -> IssuerPath? {
        let prefix = basePath + "/v1/"
        guard path.hasPrefix(prefix) else { return nil }
        let rest = path.dropFirst(prefix.count)
        if rest == "jwks" { return .jwks }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "projects", parts[2] == "apps", !parts[1].isEmpty else {
            return .unknown(rule: "unknown_resource")
        }
        guard let colon = parts[3].lastIndex(of: ":") else { return .unknown(rule: "no_method") }
        let appId = parts[3][..<colon]
        let name = parts[3][parts[3].index(after: colon)...]
        guard !appId.isEmpty, let method = IssuerMethod(rawValue: String(name)) else {
            return .unknown(rule: "unknown_method")
        }
        return .method(project: String(parts[1]), appId: String(appId), method: method)
    }
}

/// The exchange methods of docs/issuer.md (all `POST`).
public enum IssuerMethod: String, Sendable, CaseIterable {
    case generateAppAttestChallenge
    case exchangeAppAttestAttestation
    case exchangeAppAttestAssertion
    case exchangeDeviceCheckToken
    case exchangeDebugToken
    case exchangeCustomToken

    /// The `provider` claim of the tokens this method mints; nil for the challenge.
    public var provider: String? {
        switch self {
        case .generateAppAttestChallenge: nil
        case .exchangeAppAttestAttestation, .exchangeAppAttestAssertion: "app_attest"
        case .exchangeDeviceCheckToken: "device_check"
        case .exchangeDebugToken: "debug"
        case .exchangeCustomToken: "custom"
        }
    }
}
