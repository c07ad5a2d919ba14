import Foundation
import Testing
import TestSupport
@testable import AppCheck

@Suite struct ES256AndIssuerTests {
    /// RFC 7638 §3.1: the example RSA key and its thumbprint.
    @Test func rfc7638ThumbprintVector() throws {
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
        let key = try RSAPublicKey(modulus: try #require(Base64URL.decode(n)), exponent: [1, 0, 1])
        #expect(key.jwkThumbprint == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs")
    }

    @Test func es256SignsJOSEFormAndVerifies() throws {
        let key = try ES256PrivateKey.generate()
        let publicKey = try key.publicKey
        let message = Array("header.payload".utf8)
        let signature = try key.signES256(message)
        #expect(signature.count == 64)
        #expect(publicKey.verifyES256(signingInput: message, signature: signature))
        #expect(!publicKey.verifyES256(signingInput: message + [0x2E], signature: signature))
        var flipped = signature
        flipped[63] ^= 1
        #expect(!publicKey.verifyES256(signingInput: message, signature: flipped))
        #expect(!publicKey.verifyES256(signingInput: message, signature: signature + [0]))
        #expect(!publicKey.verifyES256(signingInput: message, signature: [UInt8](repeating: 0, count: 64)), "r = s = 0")
        #expect(!(try ES256PrivateKey.generate().publicKey).verifyES256(signingInput: message, signature: signature))
        // The PKCS#8 round trip (the `.p8` form) keeps the key.
        let reloaded = try ES256PrivateKey(pemRepresentation: try key.pemRepresentation())
        #expect(publicKey.verifyES256(signingInput: message, signature: try reloaded.signES256(message)))
        // From JWK coordinates.
        let der = try #require(publicKey.derRepresentation)
        let fromJWK = try ES256PublicKey(x: Array(der[27..<59]), y: Array(der[59..<91]))
        #expect(fromJWK.verifyES256(signingInput: message, signature: signature))
        #expect(throws: ES256KeyError.self) { try ES256PublicKey(x: Array(repeating: 1, count: 32), y: Array(repeating: 2, count: 32)) }
        #expect(throws: ES256KeyError.notP256) { try ES256PrivateKey(pemRepresentation: try Fixtures.key().pemRepresentation()) }
    }

    /// An Apple-style `.p8` made by the openssl CLI loads, and its DeviceCheck JWT verifies with the public half.
    @Test func deviceCheckClientJWTFromAnOpenSSLKey() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("p8-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("AuthKey_ABC123DEFG.p8").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]
        try process.runHoldingEnvironment()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let key = try ES256PrivateKey(pemRepresentation: try String(contentsOfFile: path, encoding: .utf8))
        let token = try DeviceCheckClientJWT.make(key: key, keyId: "ABC123DEFG", teamId: "ABCDE12345", issuedAt: 1_795_478_400)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        #expect(Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == "{\"alg\":\"ES256\",\"kid\":\"ABC123DEFG\"}")
        #expect(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) } == "{\"iss\":\"ABCDE12345\",\"iat\":1795478400}")
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(try key.publicKey.verifyES256(signingInput: Array((parts[0] + "." + parts[1]).utf8), signature: signature))
    }

    @Test func issuedTokensCarryProviderAndARandomJTI() throws {
        func claims(_ token: String) throws -> [String: Any] {
            let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
            return try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        }
        let mint = {
            try TokenMinter.mintIssued(key: Fixtures.key(), kid: "k1", issuerURL: "https://api.example.com/appcheck",
                                       projectNumber: Fixtures.projectNumber, projectId: Fixtures.projectId, appId: Fixtures.appId,
                                       issuedAt: 1000, ttl: 3600, provider: .appAttest)
        }
        let first = try claims(try mint()), second = try claims(try mint())
        #expect(first["iss"] as? String == "https://api.example.com/appcheck/" + Fixtures.projectNumber)
        #expect(first["provider"] as? String == "app_attest")
        #expect(first["exp"] as? Int == 4600 && first["iat"] as? Int == 1000)
        #expect(first["aud"] as? [String] == ["projects/" + Fixtures.projectNumber, "projects/" + Fixtures.projectId])
        let jti = try #require(first["jti"] as? String)
        #expect(Base64URL.decode(jti)?.count == 16)
        #expect(jti != second["jti"] as? String)
    }
}
