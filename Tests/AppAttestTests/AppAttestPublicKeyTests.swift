import AppAttest
import Testing

@Suite struct AppAttestPublicKeyTests {
    @Test func refusesPointsThatAreNotUncompressedP256() throws {
        let vectors = try AppleVector.all()
        let point = try #require(vectors.first { $0.type == "assertion" }?.publicKeyPoint)
        #expect(AppAttestPublicKey(uncompressedPoint: point) != nil)
        var offCurve = point
        offCurve[64] ^= 1
        #expect(AppAttestPublicKey(uncompressedPoint: offCurve) == nil, "not on the curve")
        #expect(AppAttestPublicKey(uncompressedPoint: [0x02] + Array(point[1..<33])) == nil, "compressed")
        #expect(AppAttestPublicKey(uncompressedPoint: Array(point.dropFirst())) == nil, "X ‖ Y without 04")
        let key = try #require(AppAttestPublicKey(uncompressedPoint: point))
        #expect(AppAttestPublicKey(spki: key.spkiDER) == key)
        #expect(AppAttestPublicKey(spki: key.spkiDER + [0]) == nil)
        #expect(!key.verifyECDSASHA256(signature: Array(repeating: 0x30, count: 73), message: [1]), "oversized signature")
        #expect(!key.verifyECDSASHA256(signature: [], message: [1]))
    }

    @Test func rootMustBeACertificate() {
        #expect(throws: AppAttestFailure.self) { try AppAttestVerifier(rootCertificatePEM: "not a certificate") }
        #expect(throws: Never.self) { try AppAttestVerifier() }
    }

    @Test func environmentsMapToAppleAAGUIDs() {
        #expect(AppAttestEnvironment(aaguid: Array("appattestdevelop".utf8)) == .development)
        #expect(AppAttestEnvironment(aaguid: Array("appattest".utf8) + Array(repeating: 0, count: 7)) == .production)
        #expect(AppAttestEnvironment(aaguid: Array("appattest".utf8)) == nil)
    }
}
