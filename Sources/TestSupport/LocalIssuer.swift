import AppCheck
import Foundation
import Gateway
import GatewayTools

/// A stand-in for Firebase in tests: a signing key and a key-set server on 127.0.0.1.
public final class LocalIssuer: @unchecked Sendable {
    public private(set) var key: RSAPrivateKey
    public private(set) var kid: String
    public let server: KeySetServer
    private var published: [(kid: String, key: RSAPublicKey)]

    public init(bits: Int = 2048) throws {
        key = try RSAPrivateKey.generate(bits: bits)
        kid = "key-1"
        published = [(kid: kid, key: try key.publicKey)]
        server = try KeySetServer()
        server.setDocument(JWKSet.document(for: published))
    }

    public var jwksURL: String { "http://127.0.0.1:\(server.port)/jwks" }

    public func mint(appId: String, ttl: Int = 3600, projectNumber: String = "123456789012",
                     projectId: String? = "demo-project", jti: String? = nil) throws -> String {
        try TokenMinter.mint(key: key, kid: kid, projectNumber: projectNumber, projectId: projectId, appId: appId,
                             issuedAt: Int(Date().timeIntervalSince1970), ttl: ttl, jti: jti)
    }

    /// Publishes a new key next to the old one and signs from now on with it; returns a token with it.
    public func rotate(appId: String = "1:123456789012:ios:abc123") throws -> String {
        key = try RSAPrivateKey.generate(bits: 2048)
        kid = "key-\(published.count + 1)"
        published.append((kid: kid, key: try key.publicKey))
        server.setDocument(JWKSet.document(for: published))
        return try mint(appId: appId)
    }

    public func stop() { server.stop() }
}
