// libFuzzer target: the custom-token path of `exchangeCustomToken` (Issuer.CustomToken: compact JWS, RS256/ES256
// header rules, then signature, audience, app, iat/exp lifetime and clock checks against a backend's key set). The
// first input byte picks the mode: even, the rest is the token as sent; odd, the rest is `header JSON`, a NUL, and
// `payload JSON`, which the harness signs (ES256, or RS256 when the byte is 1 mod 8) with the key set's own keys, so the
// checks after the signature are reached. Never crashes; every refusal carries a rule; a token that passes passes again
// with the same record, and for ES256 its high-S twin (r, n − s) is the same record (one-time use holds).
import AppCheck
import COpenSSL
import Issuer

let es256 = try! ES256PrivateKey.generate()
let rs256 = try! RSAPrivateKey.generate(bits: 2048)
let keySet: JWKSet = {
    let point = (try! es256.publicKey).derRepresentation!.suffix(64)
    let rsa = (try! rs256.publicKey).jwk(kid: "rsa1")
    let json = """
    {"keys":[{"kty":"EC","crv":"P-256","alg":"ES256","use":"sig","kid":"ec1","x":"\(Base64URL.encode(point.prefix(32)))",\
    "y":"\(Base64URL.encode(point.suffix(32)))"},{"kty":"RSA","alg":"RS256","use":"sig","kid":"rsa1","n":"\(rsa["n"]!)",\
    "e":"\(rsa["e"]!)"}]}
    """
    let set = try! JWKSet.parse(Array(json.utf8), acceptES256: true)
    precondition(set.kids.count == 2, "\(set.skipped)")
    return set
}()
let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
let audience = "https://gw.example.com/appcheck"
let now = 1_800_000_000.0

func check(_ token: String) -> Result<(rememberUntil: Double, usedRecord: [UInt8]), IssuerError> {
    Result { () throws(IssuerError) in
        let decoded = try CustomToken.decode(token)
        return try CustomToken.check(decoded, keys: keySet, appId: appId, audience: audience, now: now, clockSkew: 10)
    }
}

/// (r, n − s) with OpenSSL's big numbers, independent of `ES256Signature.lowS`.
func highSTwin(_ signature: [UInt8]) -> [UInt8] {
    let order = BN_new()!, s = BN_bin2bn(Array(signature[32...]), 32, nil)!, twin = BN_new()!
    defer { BN_free(order); BN_free(s); BN_free(twin) }
    let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1)!
    defer { EC_GROUP_free(group) }
    precondition(EC_GROUP_get_order(group, order, nil) == 1 && BN_sub(twin, order, s) == 1)
    var out = [UInt8](repeating: 0, count: 32)
    precondition(BN_bn2binpad(twin, &out, 32) == 32)
    return Array(signature[..<32]) + out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let mode = data[0]
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    var token: String
    if mode % 2 == 0 {
        token = String(decoding: rest, as: UTF8.self)
    } else {
        let nul = rest.firstIndex(of: 0) ?? rest.count
        let signingInput = Base64URL.encode(rest[..<nul]) + "." + Base64URL.encode(rest[min(nul + 1, rest.count)...])
        let signature = mode % 8 == 1 ? try! rs256.signRS256(Array(signingInput.utf8)) : try! es256.signES256(Array(signingInput.utf8))
        token = signingInput + "." + Base64URL.encode(signature)
    }
    switch check(token) {
    case let .failure(error):
        precondition(error.rule.hasPrefix("custom_token_"), "refusal without a custom_token_ rule: \(error.rule)")
    case let .success(first):
        precondition(first.usedRecord.count == 32)
        guard case let .success(again) = check(token), again.usedRecord == first.usedRecord,
              again.rememberUntil == first.rememberUntil else { preconditionFailure("a token passed once, then not") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        if let signature = Base64URL.decode(String(parts[2])), signature.count == 64,
           (try? CustomToken.decode(token))?.alg == "ES256" {
            let twin = parts[0] + "." + parts[1] + "." + Base64URL.encode(highSTwin(signature))
            guard case let .success(other) = check(twin), other.usedRecord == first.usedRecord else {
                preconditionFailure("the high-S twin of a token that passed is another record, or refused")
            }
        }
    }
    return 0
}
