import CryptoKit
import Foundation

/// DPoP (RFC 9449) for the AppCheck Gateway (docs/dpop.md): a P-256 key in the Secure Enclave (a software key on the
/// simulator, which has none), a proof for the issuer's exchange (the minted token is then bound to the key) and a
/// proof for every request.
///
/// The exact `htu` rule: `htu` = the request URL's scheme, host (port included unless it is the scheme's default) and
/// path exactly as sent, WITHOUT query and fragment (`GatewayDPoP.htu(for:)`). It must be the URL the app requests:
/// behind a TLS-terminating load balancer, the public `https://` URL. `htm` is the upper-case method; `iat` now in
/// whole seconds; `jti` a random UUID; `ath` = base64url(SHA-256(token)).
///
/// Not compiled by this project (no Apple SDK on its Linux machines); every CryptoKit name is from Apple's public API:
/// `SecureEnclave.isAvailable`, `SecureEnclave.P256.Signing.PrivateKey(compactRepresentable:accessControl:)`,
/// `.dataRepresentation` / `init(dataRepresentation:)`, `P256.Signing.PublicKey.x963Representation`,
/// `P256.Signing.ECDSASignature.rawRepresentation` (r ‖ s, JWS ES256's form).
public final class GatewayDPoP: @unchecked Sendable {
    private enum Key {
        case enclave(SecureEnclave.P256.Signing.PrivateKey)
        case software(P256.Signing.PrivateKey)

        var publicKey: P256.Signing.PublicKey {
            switch self {
            case .enclave(let key): key.publicKey
            case .software(let key): key.publicKey
            }
        }

        func signature(for data: Data) throws -> Data {
            switch self {
            case .enclave(let key): try key.signature(for: data).rawRepresentation
            case .software(let key): try key.signature(for: data).rawRepresentation
            }
        }
    }

    private let key: Key
    /// Where the key's handle is kept: for the Secure Enclave an encrypted blob only this device's enclave can use
    /// (the private key never leaves it); store it in the keychain in a real app (UserDefaults keeps this short).
    private static let storageKey = "appcheck-gateway.dpop-key"

    /// The device's key: loaded, or made on first use.
    public init() throws {
        let stored = UserDefaults.standard.data(forKey: Self.storageKey)
        if SecureEnclave.isAvailable {
            if let stored, let key = try? SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: stored) {
                self.key = .enclave(key)
            } else {
                let key = try SecureEnclave.P256.Signing.PrivateKey(compactRepresentable: false)
                UserDefaults.standard.set(key.dataRepresentation, forKey: Self.storageKey)
                self.key = .enclave(key)
            }
        } else {
            // The simulator has no Secure Enclave: a software key, for development only.
            if let stored, let key = try? P256.Signing.PrivateKey(rawRepresentation: stored) {
                self.key = .software(key)
            } else {
                let key = P256.Signing.PrivateKey()
                UserDefaults.standard.set(key.rawRepresentation, forKey: Self.storageKey)
                self.key = .software(key)
            }
        }
    }

    /// The public JWK members in RFC 7638 order (x and y are the 32-byte coordinates of the uncompressed point).
    private var jwk: [(String, String)] {
        let point = key.publicKey.x963Representation  // 0x04 ‖ x ‖ y
        return [("crv", "P-256"), ("kty", "EC"), ("x", Self.base64url(point.dropFirst().prefix(32))),
                ("y", Self.base64url(point.suffix(32)))]
    }

    private var jwkJSON: String { "{" + jwk.map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}" }

    /// RFC 7638 thumbprint: the `cnf.jkt` of tokens bound to this key.
    public var thumbprint: String { Self.base64url(Data(SHA256.hash(data: Data(jwkJSON.utf8)))) }

    /// `htu` for `url`: scheme, host (and a non-default port) and path, no query, no fragment.
    public static func htu(for url: URL) -> String {
        var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) ?? URLComponents()
        parts.query = nil
        parts.fragment = nil
        if parts.percentEncodedPath.isEmpty { parts.percentEncodedPath = "/" }
        return parts.string ?? url.absoluteString
    }

    /// A proof for `method` `url`; with `token`, its `ath`.
    public func proof(method: String, url: URL, token: String? = nil) throws -> String {
        let header = "{\"typ\":\"dpop+jwt\",\"alg\":\"ES256\",\"jwk\":\(jwkJSON)}"
        var claims: [String: Any] = ["jti": UUID().uuidString, "htm": method.uppercased(), "htu": Self.htu(for: url),
                                     "iat": Int(Date().timeIntervalSince1970)]
        if let token { claims["ath"] = Self.base64url(Data(SHA256.hash(data: Data(token.utf8)))) }
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
