import Foundation
import Testing
@testable import AppCheck

@Suite struct RSAKeyTests {
    /// Every Wycheproof RSASSA-PKCS1-v1_5 SHA-256 vector, with the key loaded both from DER and from the JWK
    /// numbers. "acceptable" vectors (all flagged `MissingNull`: a DigestInfo without the NULL parameter) are
    /// REJECTED: we accept only the canonical encoding of RFC 8017 §9.2, which is what Firebase produces.
    @Test(arguments: ["rsa_signature_2048_sha256_test.json", "rsa_signature_3072_sha256_test.json",
                      "rsa_signature_4096_sha256_test.json"])
    func wycheproofVectors(_ file: String) throws {
        let document = try Fixtures.wycheproof(file)
        let groups = try #require(document["testGroups"] as? [[String: Any]])
        var checked = 0
        var acceptable = 0
        for group in groups {
            let der = Fixtures.hex(try #require(group["publicKeyDer"] as? String))
            let numbers = try #require(group["publicKey"] as? [String: Any])
            let fromDER = try RSAPublicKey(derRepresentation: der)
            let fromJWK = try RSAPublicKey(modulus: Fixtures.hex(try #require(numbers["modulus"] as? String)),
                                           exponent: Fixtures.hex(try #require(numbers["publicExponent"] as? String)))
            #expect(fromDER.bits == group["keySize"] as? Int)
            #expect(fromJWK.bits == fromDER.bits)
            #expect(fromJWK.derRepresentation == der)
            for test in try #require(group["tests"] as? [[String: Any]]) {
                let message = Fixtures.hex(try #require(test["msg"] as? String))
                let signature = Fixtures.hex(try #require(test["sig"] as? String))
                let result = try #require(test["result"] as? String)
                let id = test["tcId"] as? Int ?? -1
                let expected: Bool
                switch result {
                case "valid": expected = true
                case "invalid": expected = false
                case "acceptable":
                    acceptable += 1
                    #expect(test["flags"] as? [String] == ["MissingNull"], "tcId \(id): new kind of acceptable vector")
                    expected = false
                default:
                    Issue.record("tcId \(id): unknown result \(result)")
                    continue
                }
                #expect(fromDER.verifyRS256(signingInput: message, signature: signature) == expected, "tcId \(id) \(result)")
                #expect(fromJWK.verifyRS256(signingInput: message, signature: signature) == expected, "tcId \(id) \(result)")
                checked += 1
            }
        }
        #expect(checked == document["numberOfTests"] as? Int)
        #expect(acceptable == 1)
    }

    @Test func signVerifyAndPEMRoundTrip() throws {
        let key = try Fixtures.key()
        #expect(key.bits == 2048)
        let message = Array("hello".utf8)
        let signature = try key.signRS256(message)
        #expect(signature.count == 256)
        let publicKey = try key.publicKey
        #expect(publicKey.verifyRS256(signingInput: message, signature: signature))
        #expect(!publicKey.verifyRS256(signingInput: Array("hellp".utf8), signature: signature))
        var flipped = signature
        flipped[10] ^= 1
        #expect(!publicKey.verifyRS256(signingInput: message, signature: flipped))
        #expect(!publicKey.verifyRS256(signingInput: message, signature: signature.dropLast()))
        #expect(!publicKey.verifyRS256(signingInput: message, signature: [0] + signature))
        #expect(!publicKey.verifyRS256(signingInput: message, signature: []))
        let other = try #require(Fixtures.otherKey).publicKey
        #expect(!other.verifyRS256(signingInput: message, signature: signature))

        let pem = try key.pemRepresentation()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let reloaded = try RSAPrivateKey(pemRepresentation: pem)
        #expect(try reloaded.publicKey.modulus == publicKey.modulus)
        #expect(publicKey.verifyRS256(signingInput: message, signature: try reloaded.signRS256(message)))
        #expect(publicKey.exponent == [0x01, 0x00, 0x01])

        let der = try #require(publicKey.derRepresentation)
        #expect(try RSAPublicKey(derRepresentation: der).modulus == publicKey.modulus)
        let pemPublic = "-----BEGIN PUBLIC KEY-----\n" + Data(der).base64EncodedString(options: .lineLength64Characters)
            + "\n-----END PUBLIC KEY-----\n"
        #expect(try RSAPublicKey(pemRepresentation: pemPublic).modulus == publicKey.modulus)
    }

    @Test func refusesBadKeys() throws {
        #expect(throws: RSAKeyError.unsupportedSize(1024)) { try RSAPrivateKey.generate(bits: 1024) }
        #expect(throws: RSAKeyError.self) { try RSAPrivateKey(pemRepresentation: "not a key") }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(derRepresentation: [0x30, 0x03, 0x02, 0x01]) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(derRepresentation: []) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(pemRepresentation: "") }
        let n = try Fixtures.key().publicKey.modulus
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(modulus: n, exponent: [1]) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(modulus: n, exponent: [0, 1]) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(modulus: n, exponent: [4]) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(modulus: n, exponent: []) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(modulus: n, exponent: [UInt8](repeating: 0xFF, count: 9)) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(modulus: n.dropLast() + [0x02], exponent: [3]) }
        #expect(throws: RSAKeyError.self) { try RSAPublicKey(modulus: [], exponent: [3]) }
        #expect(try RSAPublicKey(modulus: n, exponent: [3]).bits == 2048)
    }

    @Test func verifiesConcurrently() async throws {
        let key = try Fixtures.key()
        let publicKey = try key.publicKey
        let message = Array("concurrent".utf8)
        let signature = try key.signRS256(message)
        let results = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var good = 0
                    for round in 0..<40 {
                        // Odd rounds use a wrong message: each call must judge its own input.
                        let input = round % 2 == 0 ? message : message + [UInt8(worker)]
                        if publicKey.verifyRS256(signingInput: input, signature: signature) == (round % 2 == 0) { good += 1 }
                    }
                    return good
                }
            }
            return await group.reduce(0, +)
        }
        #expect(results == 8 * 40)
    }

    @Test func generates3072BitKeysForMint() throws {
        let key = try RSAPrivateKey.generate(bits: 3072)
        #expect(key.bits == 3072)
        let token = try TokenMinter.mint(key: key, kid: "k3072", projectNumber: Fixtures.projectNumber,
                                         appId: Fixtures.appId, issuedAt: Int(Fixtures.now), ttl: 3600)
        let keys = try JWKSet.parse(Array(JWKSet.document(for: [("k3072", try key.publicKey)]).utf8))
        let policy = AppCheckPolicy(projectNumber: Fixtures.projectNumber)
        let claims = try AppCheckVerifier.verify(token: token, keys: keys, policy: policy, now: Fixtures.now).get()
        #expect(claims.appId == Fixtures.appId)
    }
}
