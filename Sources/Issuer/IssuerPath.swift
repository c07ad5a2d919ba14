import HTTPWire

/// Where an issuer request goes (docs/issuer.md): `<base>/v1/jwks`, `<base>/v1/projects/{project}/apps/{app_id}:{method}`,
/// or the OIDC discovery document at `<path of iss>/.well-known/openid-configuration`. Matched on the normalised path,
/// before routes.
public enum IssuerPath: Equatable, Sendable {
    /// `GET <base>/v1/jwks`.
    case jwks
    /// `GET <path of iss>/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4).
    case discovery
    /// A `projects.apps` method call.
    case method(project: String, appId: String, method: IssuerMethod)
    /// Under `<base>/v1/` but no such resource or method (404 `NOT_FOUND`); `rule` says why.
    case unknown(rule: String)

    /// nil when `path` is neither `discoveryPath` nor under `<basePath>/v1/` (the request goes on to route matching).
    /// The discovery path is looked at first: the issuer URL's path may lie under the base path (or anywhere else).
    public static func match(_ path: Substring, basePath: String, discoveryPath: String? = nil) -> IssuerPath? {
        if let discoveryPath, path == discoveryPath { return .discovery }
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

extension IssuerPath {
    /// The normalised path the discovery document is served at: the path of `iss` (`<issuer_url>/<project_number>`)
    /// followed by `/.well-known/openid-configuration` (OpenID Connect Discovery 1.0 §4: the issuer's path, then the
    /// well-known suffix). `issuer_url` `https://api.example.com/appcheck` → `/appcheck/<number>/.well-known/openid-configuration`;
    /// with no path → `/<number>/.well-known/openid-configuration`. Nil when the path cannot be normalised (the loader
    /// admits only URLs whose path can).
    package static func discoveryPath(issuerURL: String, projectNumber: String) -> String? {
        let path = IssuerURLParts(issuerURL).path
        return RequestTarget.normalize(Substring(path + "/" + projectNumber + "/.well-known/openid-configuration"))
    }
}

/// `issuer_url` split into its origin (`scheme://host[:port]`, as written) and its path (as written, possibly empty).
/// The loader has checked it: an `http(s)://` URL with a host and no user info, query, fragment or trailing `/`.
struct IssuerURLParts {
    let origin: String
    let path: String

    init(_ url: String) {
        guard let schemeEnd = url.range(of: "://") else {
            origin = url
            path = ""
            return
        }
        let afterScheme = url[schemeEnd.upperBound...]
        let slash = afterScheme.firstIndex(of: "/") ?? url.endIndex
        origin = String(url[..<slash])
        path = String(url[slash...])
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
    case generateAndroidKeyChallenge
    case exchangeAndroidKeyAttestation
    case exchangeAndroidKeyAssertion

    /// The `provider` claim of the tokens this method mints; nil for the challenge.
    public var provider: String? {
        switch self {
        case .generateAppAttestChallenge, .generateAndroidKeyChallenge: nil
        case .exchangeAppAttestAttestation, .exchangeAppAttestAssertion: "app_attest"
        case .exchangeDeviceCheckToken: "device_check"
        case .exchangeDebugToken: "debug"
        case .exchangeCustomToken: "custom"
        case .exchangeAndroidKeyAttestation, .exchangeAndroidKeyAssertion: "android_key"
        }
    }
}
