/// The payload of a parsed token: a JSON object whose claims `AppCheckVerifier.checkClaims` judges.
///
/// Small and `Sendable`, so a verified-token cache can keep it and re-run the time checks on every hit
/// without the token text or the RSA work.
public struct TokenClaims: Sendable {
    /// The payload object, members in document order, keys unique.
    public let payload: JSONValue

    /// The replay key (docs/behaviour.md, replay protection) for a token without `jti`: SHA-256(signing input + "." + raw signature bytes).
    /// `nil` when the payload has a `jti` member (then the key is SHA-256(sub + "\n" + jti)).
    let signatureReplayKey: [UInt8]?

    init(payload: JSONValue, signatureReplayKey: [UInt8]?) {
        self.payload = payload
        self.signatureReplayKey = signatureReplayKey
    }
}
