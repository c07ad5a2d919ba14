import AppAttest
import Foundation
import Testing
import TestSupport

/// The TestSupport device speaks the wire form (standard base64, clientData = artifact ‖ challenge) that
/// the issuer endpoints will receive, and its root file is what `root_ca_file` will name.
@Suite struct SimulatedIPhoneTests {
    @Test func wireFormVerifiesAgainstTheRootFile() throws {
        let phone = try SimulatedIPhone()
        defer { phone.cleanUp() }
        let verifier = try AppAttestVerifier(rootCertificatePEM: try String(contentsOfFile: phone.rootCAPath, encoding: .utf8))
        let challenge = Array(repeating: UInt8(0x5A), count: 32)
        let appId = AppAttestAppID(teamId: "ABCDE12345", bundleId: "com.example.app")
        let attestation = try #require(Data(base64Encoded: try phone.attestationBase64(challenge: challenge)))
        let keyId = try #require(Data(base64Encoded: phone.keyIdBase64))
        let attested = try verifier.verifyAttestation([UInt8](attestation), keyId: [UInt8](keyId),
                                                      clientDataHash: AppAttestVerifier.clientDataHash(challenge: challenge),
                                                      appId: appId, environments: [.production], at: Int64(Date().timeIntervalSince1970))
        let artifact = Array("opaque-artifact".utf8)
        let assertion = try #require(Data(base64Encoded: try phone.assertionBase64(artifact: artifact, challenge: challenge)))
        let asserted = try verifier.verifyAssertion([UInt8](assertion), clientData: artifact + challenge,
                                                    publicKey: attested.publicKey, appId: appId)
        #expect(asserted.counter == 1)
    }
}
