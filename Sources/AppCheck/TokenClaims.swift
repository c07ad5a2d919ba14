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

        /// The value, read from the stored enum in place: a `case .value(let x)` pattern on a claim copied the whole
        /// enum through the generic type's runtime value witness first (`initializeWithCopy for TokenClaims.Claim`,
        /// some 100 instructions a copy, three string claims on every token, cached or not), so the checks read this.
        var value: Value? {
            if case .value(let value) = self { return value }
            return nil
        }

        var isWrongType: Bool {
            if case .wrongType = self { return true }
            return false
        }
    }

    /// The replay key (docs/behaviour.md, replay protection) for a token without `jti`: SHA-256(signing input + "." + raw signature bytes).
    /// `nil` when the payload has a `jti` member (then the key is SHA-256(sub + "\n" + jti)).
    let signatureReplayKey: SHA256Digest.Value?

    let iss: Claim<String>
    /// `aud`: an array, its members as parsed (`audAllStrings`: every member is a string). Kept as the JSON
    /// array, which the parse memo lends from token to token (`StrictJSON.StringMemo`): no array of Strings is built
    /// per token.
    let aud: Claim<[JSONValue]>
    let audAllStrings: Bool
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
    /// `cnf` (RFC 7800): the confirmation of a token bound to a key (SPEC §4.4); only `{"jkt": "<thumbprint>"}` is
    /// understood (`AppCheckVerifier.checkClaims` refuses any other form as `malformed`).
    let cnf: Claim<JSONValue>
    /// SHA-256(sub + "\n" + jti) when both are strings: the replay key of a token with a `jti`. Computed when asked
    /// for (two SHA-256 blocks, some 4,000 instructions): only a replay-protected route's store asks, and the memory
    /// store not even then (`ReplayClient.consumeNow(sub:jti:expiresAt:issuedAt:now:)`).
    var jtiReplayKey: SHA256Digest.Value? {
        guard let sub = sub.value, let jti = jti.value else { return nil }
        return Self.jtiReplayKey(sub: sub, jti: jti)
    }

    /// From the payload's members as `StrictJSON.scanObject` kept them by `claimSlot` (slot `i`, `v<i>`, holds
    /// `claimNames[i]`). `signatureReplayKey` is called only when the payload has no `jti` member.
    /// The values are moved out of `found` (left empty), not copied.
    init(slots found: inout StrictJSON.MemberSlots, signatureReplayKey: () -> SHA256Digest.Value) {
        iss = Self.string(found.v0.take())
        switch found.v1.take() {
        case nil:
            aud = .absent
            audAllStrings = false
        case .array(let members)?:
            aud = .value(members)
            audAllStrings = members.allSatisfy { if case .string = $0 { true } else { false } }
        default:
            aud = .wrongType
            audAllStrings = false
        }
        sub = Self.string(found.v2.take())
        subIsHeaderSafe = sub.value.map(AppCheckVerifier.isHeaderSafeAppId) ?? false
        exp = Self.number(found.v3.take())
        iat = Self.number(found.v4.take())
        nbf = Self.number(found.v5.take())
        jti = Self.string(found.v6.take())
        provider = Self.string(found.v7.take())
        risk = Self.number(found.v8.take())
        cnf = found.v9.take().map { .value($0) } ?? .absent
        if case .absent = jti { self.signatureReplayKey = signatureReplayKey() } else { self.signatureReplayKey = nil }
    }

    /// A string claim, its value moved out of the parsed member (no copy of the string).
    @inline(__always)
    private static func string(_ json: consuming JSONValue?) -> Claim<String> {
        switch consume json {
        case nil: .absent
        case .string(let value)?: .value(value)
        default: .wrongType
        }
    }

    /// A number claim.
    @inline(__always)
    private static func number(_ json: consuming JSONValue?) -> Claim<Double> {
        switch consume json {
        case nil: .absent
        case .number(let value, _)?: .value(value)
        default: .wrongType
        }
    }

    /// SHA-256(sub + "\n" + jti).
    static func jtiReplayKey(sub: String, jti: String) -> SHA256Digest.Value {
        withJTIMaterial(sub: sub, jti: jti) { SHA256Digest.value($0) }
    }

    /// `body` on sub + "\n" + jti, the material of a `jti` token's replay key, assembled on the stack from the strings'
    /// own UTF-8, read in place (no copy of either string).
    static func withJTIMaterial<R>(sub: String, jti: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let result = sub.utf8.withContiguousStorageIfAvailable { subBytes in
            jti.utf8.withContiguousStorageIfAvailable { jtiBytes in withJTIMaterial(subBytes, jtiBytes, body) }
        }
        if let result, let result { return result }
        // Only a string that is not native UTF-8 (never one the parser made) comes here.
        return Array(sub.utf8).withUnsafeBufferPointer { s in
            Array(jti.utf8).withUnsafeBufferPointer { j in withJTIMaterial(s, j, body) }
        }
    }

    private static func withJTIMaterial<R>(_ sub: UnsafeBufferPointer<UInt8>, _ jti: UnsafeBufferPointer<UInt8>,
                                           _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let count = sub.count + 1 + jti.count
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { material in
            _ = material.initialize(fromContentsOf: sub)
            material[sub.count] = UInt8(ascii: "\n")
            _ = UnsafeMutableBufferPointer(rebasing: material[(sub.count + 1)...]).initialize(fromContentsOf: jti)
            return body(UnsafeRawBufferPointer(material))
        }
    }

    /// The slots whose plain strings `parse` may take from its memo (`StrictJSON.StringMemo`): `iss`, `aud` and `sub`,
    /// which repeat from token to token (`jti` never does).
    static let memoSlots = 1 << 0 | 1 << 1 | 1 << 2

    /// The slot of a payload member for `StrictJSON.scanObject`: its index in `claimNames`, -1 for any other.
    static func claimSlot(_ key: JSONValue.ShortKey?) -> Int {
        guard let key else { return -1 }
        return claimIndex(key) ?? -1
    }

    /// The claims decoded here, in the order of `found` in `init`.
    static let claimNames = ["iss", "aud", "sub", "exp", "iat", "nbf", "jti", "provider", "risk", "cnf"]
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
        case (3, 0x66_6E_63): return 9          // cnf
        default: return nil
        }
    }

    /// `exp` when it is a number (the cache keeps an entry until `exp + clock_skew`).
    public var expiresAt: Double? { exp.value }
    /// The `iss` claim when it is a string (unverified until the signature is checked).
    public var issuer: String? { iss.value }
}
