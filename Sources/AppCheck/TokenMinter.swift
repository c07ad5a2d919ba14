import COpenSSL

/// Signs tokens shaped exactly like Firebase App Check tokens (docs/behaviour.md), for `mint`, the demo issuer and
/// tests. Never part of verification.
public enum TokenMinter {
    /// A signed App Check token: header `{"alg":"RS256","kid":…,"typ":"JWT"}` and claims `iss`
    /// (`https://firebaseappcheck.googleapis.com/<projectNumber>`), `sub`, `aud`
    /// (`["projects/<projectNumber>","projects/<projectId>"]`, the second only when `projectId` is set),
    /// `exp` (`issuedAt + ttl`), `iat`, and `jti` when given. Times are whole seconds since the Unix epoch.
    public static func mint(key: RSAPrivateKey, kid: String, projectNumber: String, projectId: String? = nil,
                            appId: String, issuedAt: Int, ttl: Int, jti: String? = nil) throws(RSAKeyError) -> String {
        let header = "{\"alg\":\"RS256\",\"kid\":\(JSONText.quote(kid)),\"typ\":\"JWT\"}"
        var audiences = [JSONText.quote("projects/" + projectNumber)]
        if let projectId { audiences.append(JSONText.quote("projects/" + projectId)) }
        var claims = "{\"iss\":\(JSONText.quote("https://firebaseappcheck.googleapis.com/" + projectNumber))"
        claims += ",\"sub\":\(JSONText.quote(appId))"
        claims += ",\"aud\":[\(audiences.joined(separator: ","))]"
        claims += ",\"exp\":\(issuedAt + ttl),\"iat\":\(issuedAt)"
        if let jti { claims += ",\"jti\":\(JSONText.quote(jti))" }
        claims += "}"
        return try mintRaw(headerJSON: header, payloadJSON: claims, key: key)
    }

    /// A token of the gateway's own issuer (docs/issuer.md): as `mint`, but `iss` is `<issuerURL>/<projectNumber>`,
    /// and the claims always carry `jti` (128 random bits, base64url) and `provider`.
    public static func mintIssued(key: RSAPrivateKey, kid: String, issuerURL: String, projectNumber: String, projectId: String? = nil,
                                  appId: String, issuedAt: Int, ttl: Int, provider: MintedTokenProvider) throws(RSAKeyError) -> String {
        let header = "{\"alg\":\"RS256\",\"kid\":\(JSONText.quote(kid)),\"typ\":\"JWT\"}"
        var audiences = [JSONText.quote("projects/" + projectNumber)]
        if let projectId { audiences.append(JSONText.quote("projects/" + projectId)) }
        var claims = "{\"iss\":\(JSONText.quote(issuerURL + "/" + projectNumber))"
        claims += ",\"sub\":\(JSONText.quote(appId))"
        claims += ",\"aud\":[\(audiences.joined(separator: ","))]"
        claims += ",\"exp\":\(issuedAt + ttl),\"iat\":\(issuedAt)"
        claims += ",\"jti\":\(JSONText.quote(try randomJTI())),\"provider\":\(JSONText.quote(provider.rawValue))}"
        return try mintRaw(headerJSON: header, payloadJSON: claims, key: key)
    }

    /// 128 random bits from OpenSSL's CSPRNG, base64url (22 characters): a `jti` no two tokens share.
    public static func randomJTI() throws(RSAKeyError) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard bytes.withUnsafeMutableBufferPointer({ RAND_bytes($0.baseAddress, 16) }) == 1 else { throw .openSSL("RAND_bytes") }
        return Base64URL.encode(bytes)
    }

    /// Signs arbitrary header and payload bytes with ES256 (JOSE R ‖ S signature), unchecked: custom tokens
    /// from a test backend, the DeviceCheck client JWT.
    public static func mintRawES256(headerJSON: [UInt8], payloadJSON: [UInt8], key: ES256PrivateKey) throws(ES256KeyError) -> String {
        let signingInput = Base64URL.encode(headerJSON) + "." + Base64URL.encode(payloadJSON)
        return signingInput + "." + Base64URL.encode(try key.signES256(Array(signingInput.utf8)))
    }

    /// Signs arbitrary header and payload bytes with RS256, unchecked: for tests that craft hostile tokens.
    public static func mintRaw(headerJSON: [UInt8], payloadJSON: [UInt8], key: RSAPrivateKey) throws(RSAKeyError) -> String {
        let signingInput = Base64URL.encode(headerJSON) + "." + Base64URL.encode(payloadJSON)
        let signature = try key.signRS256(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `mintRaw` on the UTF-8 of `headerJSON` and `payloadJSON`.
    public static func mintRaw(headerJSON: String, payloadJSON: String, key: RSAPrivateKey) throws(RSAKeyError) -> String {
        try mintRaw(headerJSON: Array(headerJSON.utf8), payloadJSON: Array(payloadJSON.utf8), key: key)
    }
}
