import AppCheck

enum AppCheckTestClaims {
    /// Claims of a freshly minted token (for cache tests).
    static func make() throws -> TokenClaims {
        let key = try RSAPrivateKey.generate(bits: 2048)
        let token = try TokenMinter.mint(key: key, kid: "k", projectNumber: "1", appId: "a", issuedAt: 0, ttl: 60)
        return try AppCheckToken.parse(token).get().claims
    }
}
