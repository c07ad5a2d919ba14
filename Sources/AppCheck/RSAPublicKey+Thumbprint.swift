extension RSAPublicKey {
    /// The RFC 7638 JWK thumbprint: base64url(SHA-256 of `{"e":…,"kty":"RSA","n":…}`), the required members in
    /// lexicographic order with no whitespace (RFC 7638 §3.2). The issuer's `kid` for this key.
    public var jwkThumbprint: String {
        let canonical = "{\"e\":\"\(Base64URL.encode(exponent))\",\"kty\":\"RSA\",\"n\":\"\(Base64URL.encode(modulus))\"}"
        return Base64URL.encode(SHA256Digest.hash(Array(canonical.utf8)))
    }
}
