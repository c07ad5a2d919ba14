import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking  // Linux only, where this project's test compiles and runs this file (README.md)
#endif

/// DPoP (RFC 9449) for the AppCheck Gateway (docs/dpop.md): a proof for the issuer's exchange (the minted token is
/// then bound to the key) and a proof for every request. The key comes from `SecureEnclaveDPoPKey.swift` (a P-256
/// key in the Secure Enclave; a software key on the simulator, which has none):
///
///     let dpop = GatewayDPoP(key: try SecureEnclaveDPoPKey.deviceKey())
///
/// The exact `htu` rule: `htu` = the request URL's scheme, host (port included unless it is the scheme's default) and
/// path exactly as sent, WITHOUT query and fragment (`GatewayDPoP.htu(for:)`). It must be the URL the app requests:
/// behind a TLS-terminating load balancer, the public `https://` URL. `htm` is the upper-case method; `iat` now in
/// whole seconds; `jti` a random UUID; `ath` = base64url(SHA-256(token)).
///
/// Foundation only: everything that needs CryptoKit is behind `DPoPKey`.
public final class GatewayDPoP: @unchecked Sendable {
    private let key: any DPoPKey

    public init(key: any DPoPKey) {
        self.key = key
    }

    /// The public JWK members in RFC 7638 order (x and y are the 32-byte coordinates of the uncompressed point).
    private var jwk: [(String, String)] {
        let point = key.x963PublicKey  // 0x04 ‖ x ‖ y
        return [("crv", "P-256"), ("kty", "EC"), ("x", Self.base64url(point.dropFirst().prefix(32))),
                ("y", Self.base64url(point.suffix(32)))]
    }

    private var jwkJSON: String { "{" + jwk.map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}" }

    /// RFC 7638 thumbprint: the `cnf.jkt` of tokens bound to this key.
    public var thumbprint: String { Self.base64url(key.sha256(Data(jwkJSON.utf8))) }

    /// `htu` for `url`: scheme, host (and a non-default port) and path, no query, no fragment.
    public static func htu(for url: URL) -> String {
        var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) ?? URLComponents()
        parts.query = nil
        parts.fragment = nil
        if parts.port == (parts.scheme?.lowercased() == "https" ? 443 : parts.scheme?.lowercased() == "http" ? 80 : nil) {
            parts.port = nil
        }
        if parts.percentEncodedPath.isEmpty { parts.percentEncodedPath = "/" }
        return parts.string ?? url.absoluteString
    }

    /// A proof for `method` `url`; with `token`, its `ath`.
    public func proof(method: String, url: URL, token: String? = nil) throws -> String {
        let header = "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(jwkJSON)}"
        var claims: [String: Any] = ["jti": UUID().uuidString, "htm": method.uppercased(), "htu": Self.htu(for: url),
                                     "iat": Int(Date().timeIntervalSince1970)]
        if let token { claims["ath"] = Self.base64url(key.sha256(Data(token.utf8))) }
        let payload = try JSONSerialization.data(withJSONObject: claims)
        let input = Self.base64url(Data(header.utf8)) + "." + Self.base64url(payload)
        return input + "." + Self.base64url(try key.signature(for: Data(input.utf8)))
    }

    /// Adds `DPoP` to an issuer exchange request (`POST …/apps/<app_id>:exchange…`): the token it mints is bound.
    /// Shaped as AppCheckCore's request hook (`GACAppCheckAPIRequestHook`, `(NSMutableURLRequest) -> Void`), which runs
    /// after the URL is set, so the proof names the final URL.
    public var exchangeHook: (NSMutableURLRequest) -> Void {
        { [self] request in
            guard let url = request.url, let proof = try? proof(method: "POST", url: url) else { return }
            request.setValue(proof, forHTTPHeaderField: "DPoP")
        }
    }

    /// A request to the gateway with `X-Firebase-AppCheck` and a fresh `DPoP` proof.
    public func data(for request: URLRequest, token: String, session: URLSession = .shared) async throws -> (Data, URLResponse) {
        var request = request
        guard let url = request.url else { throw URLError(.badURL) }
        request.setValue(token, forHTTPHeaderField: "X-Firebase-AppCheck")
        request.setValue(try proof(method: request.httpMethod ?? "GET", url: url, token: token), forHTTPHeaderField: "DPoP")
        return try await session.data(for: request)
    }

    static func base64url<D: DataProtocol>(_ data: D) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// What a proof needs from the device's key: on iOS `SecureEnclaveDPoPKey` (CryptoKit).
public protocol DPoPKey: Sendable {
    /// The P-256 public key as an uncompressed point: 0x04 ‖ x ‖ y, 65 bytes (CryptoKit's `x963Representation`).
    var x963PublicKey: Data { get }
    /// The ES256 signature of `data` (ECDSA P-256 with SHA-256) as JWS wants it: r ‖ s, 32 bytes each (CryptoKit's
    /// `ECDSASignature.rawRepresentation`).
    func signature(for data: Data) throws -> Data
    /// SHA-256 of `data` (for the thumbprint and `ath`).
    func sha256(_ data: Data) -> Data
}
