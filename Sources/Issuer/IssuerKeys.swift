import AppCheck
import Foundation

/// The issuer's signing keys (docs/issuer.md `signing_keys`): the first signs, all are published at
/// `<base_path>/v1/jwks`, and the same public keys form the gateway's own key set for verification (§4.3).
public struct IssuerKeys: Sendable {
    /// The key that signs, with its `kid`.
    public let signer: (kid: String, key: RSAPrivateKey)
    /// Every configured key's public half, signer first.
    public let published: [(kid: String, key: RSAPublicKey)]
    /// `{"keys":[…]}`, served with `Cache-Control: public, max-age=3600`.
    public let document: [UInt8]

    /// `keys` in configuration order with their `kid`s; at least one.
    public init(_ keys: [(kid: String, key: RSAPrivateKey)]) throws(RSAKeyError) {
        guard let first = keys.first else { throw .invalidEncoding("the issuer needs at least one signing key") }
        signer = first
        var published: [(kid: String, key: RSAPublicKey)] = []
        for (kid, key) in keys { published.append((kid, try key.publicKey)) }
        self.published = published
        document = Array(JWKSet.document(for: published).utf8)
    }

    /// Reads `signing_keys` (RSA PEM files, in configuration order); each `kid` is the RFC 7638 thumbprint of
    /// its public key. Throws with the file's path when one cannot be read or is not an RSA private key.
    public static func load(paths: [String]) throws -> IssuerKeys {
        var keys: [(kid: String, key: RSAPrivateKey)] = []
        for path in paths {
            let pem: String
            do { pem = try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw IssuerStartError("\(path): cannot read the signing key")
            }
            do {
                let key = try RSAPrivateKey(pemRepresentation: pem)
                keys.append((try key.publicKey.jwkThumbprint, key))
            } catch {
                throw IssuerStartError("\(path): not an RSA private key (\(error))")
            }
        }
        return try IssuerKeys(keys)
    }

    /// The published keys as a verification key set.
    public var keySet: JWKSet { JWKSet(keys: published) }
}
