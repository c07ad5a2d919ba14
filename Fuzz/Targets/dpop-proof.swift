// libFuzzer target: the DPoP proof parser and verifier (AppCheck.DPoPProof, DPoPVerifier: compact JWS, typ, alg,
// jwk, thumbprint, signature through OpenSSL, htm, htu, iat, ath, jti) against one fixed request. The first input byte
// picks the mode: 0 mod 3, the rest is a proof as sent; 1 mod 3, the rest edits the harness's own valid proofs (ES256
// and EdDSA): pairs of (offset, byte) set bytes, so the fuzzer reaches every check with a good signature's neighbours;
// 2 mod 3, the rest is `header JSON`, a NUL, and `payload JSON`, which the harness signs with its ES256 key (the
// text `JWK` in the header becomes that key's public JWK, `ATH` in the payload the token's hash), so the claim checks
// are reached. Never crashes; a verdict is the same twice; a proof passes only when its bytes are
// exactly those of a proof the harness signed (for ES256, or the high-S twin of its signature: ECDSA malleability,
// harmless because single use keys on the jti).
import AppCheck
import COpenSSL

let es256 = DPoPPrivateKey.generate(.es256)!
let ed25519 = DPoPPrivateKey.generate(.edDSA)!
let now = 1_800_000_000.0
let token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"
let htu = "https://api.example.com/v1/items"

func request(_ key: DPoPPrivateKey) -> DPoPRequest {
    DPoPRequest(method: "GET", scheme: "https", authority: "api.example.com", path: "/v1/items",
                accessToken: Array(token.utf8), thumbprint: key.thumbprint, maxAge: 60, clockSkew: 5)
}
let proofs = [es256, ed25519].map { key in (key, Array(key.proof(htm: "GET", htu: htu, iat: now, jti: "j", accessToken: token)!.utf8)) }

/// (r, n − s) with OpenSSL's big numbers.
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

/// `proof`, and for ES256 the proof with its signature's high-S twin: the only byte strings that may pass.
func acceptable(_ proof: [UInt8], _ key: DPoPPrivateKey) -> [[UInt8]] {
    guard key.algorithm == .es256, let lastDot = proof.lastIndex(of: UInt8(ascii: ".")),
          let signature = Base64URL.decode(proof[(lastDot + 1)...]), signature.count == 64 else { return [proof] }
    return [proof, Array(proof[...lastDot]) + Array(Base64URL.encode(highSTwin(signature)).utf8)]
}

func judge(_ bytes: [UInt8], signedBy key: DPoPPrivateKey, original: [UInt8]?) {
    let first = DPoPVerifier.verify(bytes, request: request(key), now: now)
    let second = DPoPVerifier.verify(bytes, request: request(key), now: now)
    precondition(first == second, "two verdicts for one proof")
    guard case .success = first else { return }
    if let original {
        precondition(acceptable(original, key).contains(bytes), "a changed proof still passes")
    }
    // Any one byte changed makes it fail.
    for i in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 16)) {
        var changed = bytes
        changed[i] ^= 0x01
        if case .success = DPoPVerifier.verify(changed, request: request(key), now: now) {
            precondition(acceptable(bytes, key).contains(changed), "a proof with byte \(i) changed passes")
        }
    }
}

/// `bytes` with the first `marker` replaced by `text`.
func replacing(_ bytes: [UInt8], _ marker: String, with text: String) -> [UInt8] {
    let m = Array(marker.utf8)
    guard bytes.count >= m.count else { return bytes }
    for i in 0...(bytes.count - m.count) where Array(bytes[i..<(i + m.count)]) == m {
        return Array(bytes[..<i]) + Array(text.utf8) + Array(bytes[(i + m.count)...])
    }
    return bytes
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let mode = data[0] % 3
    let rest = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch mode {
    case 0:
        for (key, proof) in proofs {
            let result = DPoPVerifier.verify(rest, request: request(key), now: now)
            if case .success = result {
                precondition(acceptable(proof, key).contains(rest), "a proof the harness never signed passes")
            }
        }
    case 1:
        let (key, proof) = proofs[rest.first.map { Int($0) % 2 } ?? 0]
        var edited = proof
        var i = 1
        while i + 1 < rest.count, !edited.isEmpty {
            let offset = Int(rest[i]) * 7 % edited.count
            if rest[i + 1] == 0 { edited.remove(at: offset) } else { edited[offset] = rest[i + 1] }
            i += 2
        }
        judge(edited, signedBy: key, original: proof)
    default:
        let nul = rest.firstIndex(of: 0) ?? rest.count
        let header = replacing(Array(rest[..<nul]), "JWK", with: es256.publicJWKJSON)
        let payload = replacing(Array(rest[min(nul + 1, rest.count)...]), "ATH",
                                with: Base64URL.encode(SHA256Digest.hash(Array(token.utf8))))
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        guard let signature = es256.sign(Array(signingInput.utf8)) else { preconditionFailure("signing failed") }
        judge(Array((signingInput + "." + Base64URL.encode(signature)).utf8), signedBy: es256, original: nil)
    }
    return 0
}
