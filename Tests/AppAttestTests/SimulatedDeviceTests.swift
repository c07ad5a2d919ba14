import AppAttest
import AppAttestSimulator
import Testing

/// End to end through the simulator: a valid attestation and assertion pass, and each rule of docs/issuer.md
/// broken alone fails with exactly that rule.
@Suite struct SimulatedDeviceTests {
    static let now: Int64 = 1_795_478_400 // 2026-11-23T00:00:00Z
    let ca: SimulatedAppAttestCA
    let device: SimulatedAppAttestDevice
    let verifier: AppAttestVerifier
    let appId = AppAttestAppID(teamId: "ABCDE12345", bundleId: "com.example.app")
    let challenge: [UInt8] = Array(repeating: 7, count: 32)

    init() throws {
        ca = try SimulatedAppAttestCA(now: Self.now)
        device = try SimulatedAppAttestDevice(ca: ca, appId: appId, environment: .production)
        verifier = try AppAttestVerifier(rootCertificatePEM: ca.rootPEM)
    }

    func attestationRule(_ options: SimulatedAppAttestDevice.AttestationOptions = .init(), keyId: [UInt8]? = nil,
                         environments: Set<AppAttestEnvironment> = [.production], at time: Int64 = now,
                         mutate: ([UInt8]) -> [UInt8] = { $0 }) throws -> AppAttestRule? {
        let hash = AppAttestVerifier.clientDataHash(challenge: challenge)
        let object = mutate(try device.attest(clientDataHash: hash, now: Self.now, options: options))
        do {
            let result = try verifier.verifyAttestation(object, keyId: keyId ?? device.keyId, clientDataHash: hash, appId: appId,
                                                        environments: environments, at: time)
            #expect(result.publicKey == device.publicKey)
            return nil
        } catch let failure as AppAttestFailure { return failure.rule } catch { return nil }
    }

    @Test func validAttestationPasses() throws {
        #expect(try attestationRule() == nil)
        var options = SimulatedAppAttestDevice.AttestationOptions()
        options.extensions = CBORMap([(.text("apple_bundle_version_01"), .text("1"))])
        #expect(try attestationRule(options) == nil, "iOS 27 extensions map without the ED flag")
    }

    @Test func eachAttestationRuleBrokenAlone() throws {
        var options = SimulatedAppAttestDevice.AttestationOptions()
        options.format = "packed"
        #expect(try attestationRule(options) == .format)

        options = .init()
        options.certificates = { leaf, _ in [leaf] }
        #expect(try attestationRule(options) == .certificateCount)
        options.certificates = { leaf, intermediate in [leaf, intermediate, intermediate] }
        #expect(try attestationRule(options) == .certificateCount)
        options.certificates = { leaf, _ in [leaf, leaf] }
        #expect(try attestationRule(options) == .certificateChain)
        options.certificates = { leaf, intermediate in [leaf, intermediate + [0]] }
        #expect(try attestationRule(options) == .certificateChain, "trailing bytes after a certificate")

        #expect(try attestationRule(at: Self.now + 4 * 86_400) == .certificateChain, "leaf expired")
        #expect(try attestationRule(at: Self.now - 3600) == .certificateChain, "leaf not yet valid")
        let appleVerifier = try AppAttestVerifier()
        let hash = AppAttestVerifier.clientDataHash(challenge: challenge)
        let object = try device.attest(clientDataHash: hash, now: Self.now)
        #expect(throws: AppAttestFailure.self) {
            try appleVerifier.verifyAttestation(object, keyId: device.keyId, clientDataHash: hash, appId: appId, environments: [.production], at: Self.now)
        }

        options = .init()
        options.certifiedNonce = Array(repeating: 1, count: 32)
        #expect(try attestationRule(options) == .nonce)
        options = .init()
        options.omitNonceExtension = true
        #expect(try attestationRule(options) == .nonce)
        options = .init()
        options.nonceExtension = [0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + Array(repeating: 0, count: 32) + [0]
        #expect(try attestationRule(options) == .nonce, "trailing byte in the extension DER")
        options.nonceExtension = [0x30, 0x22, 0x04, 0x20] + Array(repeating: 0, count: 32)
        #expect(try attestationRule(options) == .nonce, "no [1] EXPLICIT tag")

        #expect(try attestationRule(keyId: Array(repeating: 0, count: 32)) == .keyId)
        #expect(try attestationRule(keyId: []) == .keyId)

        options = .init()
        options.appId = "ABCDE12345.com.example.other"
        #expect(try attestationRule(options) == .rpIdHash)

        options = .init()
        options.counter = 1
        #expect(try attestationRule(options) == .counter)

        options = .init()
        options.aaguid = Array("appattestxxxxxxx".utf8)
        #expect(try attestationRule(options) == .aaguid)
        #expect(try attestationRule(environments: [.development]) == .environment)

        options = .init()
        options.credentialId = Array(repeating: 9, count: 32)
        #expect(try attestationRule(options) == .credentialId)

        #expect(try attestationRule(mutate: { $0 + [0] }) == .malformed, "trailing bytes after the object")
        #expect(try attestationRule(mutate: { Array($0.dropLast()) }) == .malformed)
    }

    @Test func assertionsPassAndEachRuleBrokenAlone() throws {
        let artifact = Array("artifact".utf8)
        let clientData = artifact + challenge
        let first = try verifier.verifyAssertion(try device.assert(clientData: clientData), clientData: clientData,
                                                 publicKey: device.publicKey, appId: appId)
        let second = try verifier.verifyAssertion(try device.assert(clientData: clientData), clientData: clientData,
                                                  publicKey: device.publicKey, appId: appId)
        #expect(first.counter == 1 && second.counter == 2)
        #expect(AppAttestCounter.accepts(presented: second.counter, stored: first.counter))
        #expect(throws: AppAttestFailure(.counterNotIncreasing, "counter 2 is not above the stored 2")) {
            try AppAttestCounter.check(presented: 2, stored: 2)
        }

        var options = SimulatedAppAttestDevice.AssertionOptions()
        options.extensions = CBORMap([(.text("apple_bundle_version_01"), .text("1"))])
        let withExtensions = try verifier.verifyAssertion(try device.assert(clientData: clientData, options: options),
                                                          clientData: clientData, publicKey: device.publicKey, appId: appId)
        #expect(withExtensions.extensions != nil)

        func rule(_ object: [UInt8], clientData: [UInt8] = clientData, key: AppAttestPublicKey? = nil) -> AppAttestRule? {
            do { _ = try verifier.verifyAssertion(object, clientData: clientData, publicKey: key ?? device.publicKey, appId: appId); return nil }
            catch let failure as AppAttestFailure { return failure.rule } catch { return nil }
        }
        #expect(rule(try device.assert(clientData: clientData), clientData: artifact + Array(repeating: 8, count: 32)) == .signature)
        let other = try SimulatedAppAttestDevice(ca: ca, appId: appId)
        #expect(rule(try device.assert(clientData: clientData), key: other.publicKey) == .signature)
        options = .init()
        options.appId = "ABCDE12345.com.example.other"
        #expect(rule(try device.assert(clientData: clientData, options: options)) == .rpIdHash)
        #expect(rule(CBORWriter.encode(.map(CBORMap([(.text("signature"), .bytes([0x30]))])))) == .malformed)
    }
}
