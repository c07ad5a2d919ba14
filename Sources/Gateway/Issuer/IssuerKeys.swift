import AppCheck

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

    /// The published keys as a verification key set.
    public var keySet: JWKSet { JWKSet(keys: published) }
}
