import AppCheck

/// The success bodies of docs/issuer.md's table, exactly as Firebase's exchange API writes them.
public enum IssuerResponse {
    /// `generateAppAttestChallenge`: `{"challenge": b64, "ttl": "300s"}`.
    public static func challenge(_ challenge: [UInt8], ttl: Int) -> [UInt8] {
        Array("{\"challenge\":\"\(IssuerJSON.encodeBase64(challenge))\",\"ttl\":\"\(IssuerJSON.duration(ttl))\"}".utf8)
    }

    /// `exchangeAppAttestAttestation`: `{"artifact": b64, "appCheckToken": {"token", "ttl"}}`.
    public static func attestation(artifact: [UInt8], token: String, ttl: Int) -> [UInt8] {
        Array("{\"artifact\":\"\(IssuerJSON.encodeBase64(artifact))\",\"appCheckToken\":\(tokenObject(token, ttl: ttl))}".utf8)
    }

    /// Every other exchange: `{"token", "ttl"}`.
    public static func token(_ token: String, ttl: Int) -> [UInt8] {
        Array(tokenObject(token, ttl: ttl).utf8)
    }

    private static func tokenObject(_ token: String, ttl: Int) -> String {
        "{\"token\":\(JSONText.quote(token)),\"ttl\":\"\(IssuerJSON.duration(ttl))\"}"
    }
}
