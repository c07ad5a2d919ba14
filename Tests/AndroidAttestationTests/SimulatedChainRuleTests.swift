import AppAttestSimulator
import Testing
@testable import AndroidAttestation

/// Every rule of SPEC §10's Android Key Attestation refused on its own, with the simulated device's chains.
@Suite struct SimulatedChainRuleTests {
    static let now: Int64 = 1_795_000_000
    static let digest = [UInt8](repeating: 0xD1, count: 32)
    static let challenge = [UInt8](repeating: 0xC4, count: 32)

    let ca: SimulatedAndroidCA
    let device: SimulatedAndroidDevice
    let verifier: AndroidAttestationVerifier
    let policy = AndroidAttestationPolicy(packageName: "com.example.app", signingCertificateDigests: [digest])

    init() throws {
        ca = try SimulatedAndroidCA(now: Self.now)
        device = SimulatedAndroidDevice(ca: ca, packageName: "com.example.app", signingCertificateDigest: Self.digest)
        verifier = try AndroidAttestationVerifier(rootsPEM: ca.rootPEM)
    }

    /// The rule `chain` breaks, `nil` when it passes.
    func rule(_ chain: [[UInt8]], policy: AndroidAttestationPolicy? = nil, status: AndroidStatusList = .empty,
              at time: Int64 = now) -> AndroidAttestationRule? {
        do {
            _ = try verifier.verify(chain: chain, challenge: Self.challenge, policy: policy ?? self.policy, statusList: status, at: time)
            return nil
        } catch { return error.rule }
    }

    func chain(_ change: (inout SimulatedKeyDescription) -> Void = { _ in }) throws -> [[UInt8]] {
        var description = SimulatedKeyDescription()
        change(&description)
        return try device.generateKey(challenge: Self.challenge, now: Self.now, description: description).chain
    }

    @Test func aValidChainPassesAndNamesItsKey() throws {
        let key = try device.generateKey(challenge: Self.challenge, now: Self.now)
        let attested = try verifier.verify(chain: key.chain, challenge: Self.challenge, policy: policy, statusList: .empty, at: Self.now)
        #expect(attested.keyDescription.attestationChallenge == Self.challenge)
        #expect(attested.uncompressedPoint.count == 65)
        #expect(rule(key.chain) == nil)
        #expect(rule(Array(key.chain.dropLast())) == nil)
    }

    @Test func eachRuleOnItsOwn() throws {
        let good = try chain()
        // Shape: empty, oversized, not DER.
        #expect(rule([]) == .chainMalformed)
        #expect(rule(Array(repeating: ca.intermediateDER, count: 8) + [good[0]]) == .chainMalformed)
        #expect(rule([good[0] + [0]] + good.dropFirst()) == .chainMalformed)
        // Untrusted: Google's roots do not know the simulator; another simulated PKI; expired; not yet valid.
        #expect((try? AndroidAttestationVerifier().verify(chain: good, challenge: Self.challenge, policy: policy,
                                                          statusList: .empty, at: Self.now)) == nil)
        let stranger = SimulatedAndroidDevice(ca: try SimulatedAndroidCA(now: Self.now), packageName: "com.example.app",
                                              signingCertificateDigest: Self.digest)
        #expect(rule(try stranger.generateKey(challenge: Self.challenge, now: Self.now).chain) == .chainUntrusted)
        #expect(rule(good, at: Self.now - 2 * 86_400) == .chainUntrusted)
        #expect(rule(good, at: Self.now + 400 * 86_400) == .chainUntrusted)
        // A chain missing its intermediate.
        #expect(rule([good[0], good[2]]) == .chainUntrusted)
        // Status list: the intermediate revoked, then suspended.
        #expect(rule(good, status: AndroidStatusList(entries: [ca.intermediateSerialHex: .revoked])) == .certificateRevoked)
        #expect(rule(good, status: AndroidStatusList(entries: ["0" + ca.intermediateSerialHex.uppercased(): .suspended])) == .certificateSuspended)
        #expect(rule(good, status: AndroidStatusList(entries: ["7e57ca02": .revoked])) == nil)
        // KeyDescription: missing, malformed, repeated higher up.
        let bare = try ca.issueLeaf(spki: try leafSPKI(), keyDescription: nil, notBefore: Self.now - 60, notAfter: Self.now + 86_400)
        #expect(rule([bare] + good.dropFirst()) == .keyDescriptionMissing)
        #expect(rule(try chain { $0.rawValue = [0x30, 0x03, 0x02, 0x01] }) == .keyDescriptionMalformed)
        #expect(rule(try chain { $0.rawValue = [0x30, 0x80, 0x00, 0x00] }) == .keyDescriptionMalformed)
        let twiceCA = try SimulatedAndroidCA(now: Self.now, intermediateKeyDescription: SimulatedKeyDescription()
            .derForTests(challenge: Self.challenge, digest: Self.digest))
        let twice = SimulatedAndroidDevice(ca: twiceCA, packageName: "com.example.app", signingCertificateDigest: Self.digest)
        let twiceVerifier = try AndroidAttestationVerifier(rootsPEM: twiceCA.rootPEM)
        let repeated = try twice.generateKey(challenge: Self.challenge, now: Self.now).chain
        #expect(throws: AndroidAttestationFailure.self) {
            _ = try twiceVerifier.verify(chain: repeated, challenge: Self.challenge, policy: policy, statusList: .empty, at: Self.now)
        }
        do {
            _ = try twiceVerifier.verify(chain: repeated, challenge: Self.challenge, policy: policy, statusList: .empty, at: Self.now)
        } catch { #expect(error.rule == .keyDescriptionRepeated) }
        // The KeyDescription fields, in SPEC order.
        #expect(rule(try chain { $0.origin = 2 }) == .origin)
        #expect(rule(try chain { $0.challenge = [UInt8](repeating: 0xC5, count: 32) }) == .challenge)
        #expect(rule(try chain { $0.attestationSecurityLevel = 0 }) == .securityLevel)
        #expect(rule(try chain { $0.keyMintSecurityLevel = 0 }) == .securityLevel)
        #expect(rule(try chain { $0.attestationSecurityLevel = 3 }) == .keyDescriptionMalformed)
        var strongBox = policy
        strongBox.requireStrongBox = true
        #expect(rule(good, policy: strongBox) == .strongBoxRequired)
        #expect(rule(try chain { $0.attestationSecurityLevel = 2; $0.keyMintSecurityLevel = 2 }, policy: strongBox) == nil)
        #expect(rule(try chain { $0.deviceLocked = false }) == .deviceUnlocked)
        #expect(rule(try chain { $0.verifiedBootState = 2 }) == .bootNotVerified)
        #expect(rule(try chain { $0.verifiedBootState = 1 }) == .bootNotVerified)
        #expect(rule(try chain { $0.packageName = "com.example.other" }) == .packageName)
        #expect(rule(try chain { $0.signatureDigests = [[UInt8](repeating: 0xD2, count: 32)] }) == .signingCertificate)
        var patched = policy
        patched.minimumPatchLevel = 202_612
        #expect(rule(good, policy: patched) == .patchLevel)
        #expect(rule(try chain { $0.osPatchLevel = nil }, policy: patched) == .patchLevel)
        #expect(rule(try chain { $0.osPatchLevel = 202_612 }, policy: patched) == nil)
    }

    private func leafSPKI() throws -> [UInt8] {
        // Any P-256 key: take the one of a fresh simulated leaf.
        let leaf = try #require(AndroidCertificate(der: try device.generateKey(challenge: Self.challenge, now: Self.now).chain[0]))
        return try #require(leaf.publicKeySPKI())
    }
}
