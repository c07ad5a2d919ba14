/// The payload of a parsed token: a JSON object whose claims `AppCheckVerifier.checkClaims` judges.
///
/// Small and `Sendable`, so a verified-token cache can keep it and re-run the time checks on every hit
/// without the token text or the RSA work. The claims the checks read are decoded once, here, into typed
/// fields (`Claim`), so a cache hit compares numbers and strings instead of walking the JSON again.
public struct TokenClaims: Sendable {
    /// One claim as the checks see it: absent, present with the wrong JSON type, or its value.
    enum Claim<Value: Sendable>: Sendable {
        case absent
        case wrongType
        case value(Value)

        init(_ json: JSONValue?, _ extract: (JSONValue) -> Value?) {
            guard let json else { self = .absent; return }
            if let value = extract(json) { self = .value(value) } else { self = .wrongType }
        }

        var value: Value? {
            if case .value(let value) = self { return value }
            return nil
        }
    }

    /// The payload object, members in document order, keys unique.
    public let payload: JSONValue

    /// The replay key (docs/behaviour.md, replay protection) for a token without `jti`: SHA-256(signing input + "." + raw signature bytes).
    /// `nil` when the payload has a `jti` member (then the key is SHA-256(sub + "\n" + jti)).
    let signatureReplayKey: [UInt8]?

    let iss: Claim<String>
    /// `aud`: an array whose members are kept as strings, `nil` for a member that is not a string.
    let aud: Claim<[String?]>
    /// The `aud` members when every one is a string, else nil.
    let audiences: [String]?
    let sub: Claim<String>
    /// `sub` is 1–1,024 bytes of 0x21–0x7E (`AppCheckVerifier.isHeaderSafeAppId`).
    let subIsHeaderSafe: Bool
    let exp: Claim<Double>
    let iat: Claim<Double>
    let nbf: Claim<Double>
    let jti: Claim<String>
    let provider: Claim<String>
    /// `risk`: App Attest's risk metric in the gateway's own tokens (judged only on routes with `max_risk`).
    let risk: Claim<Double>
    /// SHA-256(sub + "\n" + jti) when both are strings: the replay key of a token with a `jti`.
    let jtiReplayKey: [UInt8]?

    /// `signatureReplayKey` is called only when the payload has no `jti` member.
    init(payload: JSONValue, signatureReplayKey: () -> [UInt8]) {
        self.payload = payload
        // One pass over the members (an object's keys are unique), not one lookup per claim.
        var found: [JSONValue?] = Array(repeating: nil, count: Self.claimNames.count)
        if case .object(let members) = payload {
            for member in members {
                if let short = JSONValue.ShortKey(member.key), let index = Self.claimIndex(short) {
                    found[index] = member.value
                }
            }
        }
        iss = Claim(found[0]) { $0.stringValue }
        aud = Claim(found[1]) { $0.arrayValue?.map(\.stringValue) }
        if case .value(let members) = aud, !members.contains(where: { $0 == nil }) {
            audiences = members.map { $0! }
        } else {
            audiences = nil
        }
        sub = Claim(found[2]) { $0.stringValue }
        subIsHeaderSafe = sub.value.map(AppCheckVerifier.isHeaderSafeAppId) ?? false
        exp = Claim(found[3]) { $0.numberValue }
        iat = Claim(found[4]) { $0.numberValue }
        nbf = Claim(found[5]) { $0.numberValue }
        jti = Claim(found[6]) { $0.stringValue }
        provider = Claim(found[7]) { $0.stringValue }
        risk = Claim(found[8]) { $0.numberValue }
        if case .absent = jti { self.signatureReplayKey = signatureReplayKey() } else { self.signatureReplayKey = nil }
        if let sub = sub.value, let jti = jti.value {
            var material = [UInt8]()
            material.reserveCapacity(sub.utf8.count + 1 + jti.utf8.count)
            material.append(contentsOf: sub.utf8)
            material.append(UInt8(ascii: "\n"))
            material.append(contentsOf: jti.utf8)
            jtiReplayKey = SHA256Digest.hash(material)
        } else {
            jtiReplayKey = nil
        }
    }

    /// The claims decoded here, in the order of `found` in `init`.
    static let claimNames = ["iss", "aud", "sub", "exp", "iat", "nbf", "jti", "provider", "risk"]
    /// The index in `claimNames` of a packed member name (little-endian bytes), or nil: a switch on the packed
    /// value, no hashing (a test holds the constants to `claimNames`).
    static func claimIndex(_ key: JSONValue.ShortKey) -> Int? {
        switch (key.count, key.bits) {
        case (3, 0x73_73_69): return 0          // iss
        case (3, 0x64_75_61): return 1          // aud
        case (3, 0x62_75_73): return 2          // sub
        case (3, 0x70_78_65): return 3          // exp
        case (3, 0x74_61_69): return 4          // iat
        case (3, 0x66_62_6E): return 5          // nbf
        case (3, 0x69_74_6A): return 6          // jti
        case (8, 0x72_65_64_69_76_6F_72_70): return 7  // provider
        case (4, 0x6B_73_69_72): return 8       // risk
        default: return nil
        }
    }

    /// `exp` when it is a number (the cache keeps an entry until `exp + clock_skew`).
    public var expiresAt: Double? { exp.value }
    /// The `iss` claim when it is a string (unverified until the signature is checked).
    public var issuer: String? { iss.value }
}
