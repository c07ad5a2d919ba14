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
