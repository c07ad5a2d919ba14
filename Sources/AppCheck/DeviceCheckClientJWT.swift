/// The bearer token Apple's DeviceCheck API requires (docs/issuer.md, issue 12): a compact JWS signed ES256 with
/// the team's `.p8` key, header `{"alg":"ES256","kid":<key_id>}`, claims `{"iss":<team_id>,"iat":<seconds>}`.
///
/// Lives beside the other JWS code (AppCheck) rather than in AppAttest so there is one ES256 and one
/// base64url implementation. Apple accepts such a token for up to an hour; callers cache it for at most 20
/// minutes and make a new one after.
public enum DeviceCheckClientJWT {
    /// The signed token for `teamId` and `keyId`, issued at `issuedAt` (seconds since the Unix epoch).
    public static func make(key: ES256PrivateKey, keyId: String, teamId: String, issuedAt: Int) throws(ES256KeyError) -> String {
        let header = "{\"alg\":\"ES256\",\"kid\":\(JSONText.quote(keyId))}"
        let claims = "{\"iss\":\(JSONText.quote(teamId)),\"iat\":\(issuedAt)}"
        return try TokenMinter.mintRawES256(headerJSON: Array(header.utf8), payloadJSON: Array(claims.utf8), key: key)
    }
}
