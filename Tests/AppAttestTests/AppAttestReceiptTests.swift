import AppAttest
import AppAttestSimulator
import Foundation
import Testing

/// Apple's real receipts (veehaitch vectors) verify against the built-in Apple Root CA - G3 and parse to the
/// fields the upstream suite expects; simulated receipts exercise every rule; hostile bytes never crash.
@Suite struct AppAttestReceiptTests {
    struct Vector: Decodable {
        let source: String
        let teamId: String
        let bundleId: String
        let spkiBase64: String
        let receiptBase64: String
        let timestamp: String
        let type: String
        let creationTime: String
        let expirationTime: String
        let notBefore: String?
        let riskMetric: Int?
        let clientHashBase64: String
    }

    static func vectors() throws -> [Vector] {
        struct File: Decodable { let receipts: [Vector] }
        guard let url = Bundle.module.url(forResource: "receipts", withExtension: "json", subdirectory: "Vectors") else {
            throw CocoaError(.fileNoSuchFile)
        }
        return try JSONDecoder().decode(File.self, from: Data(contentsOf: url)).receipts
    }

    static func seconds(_ iso: String) -> Double {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: iso)!.timeIntervalSince1970
    }

    static func bytes(_ base64: String) -> [UInt8] { [UInt8](Data(base64Encoded: base64)!) }

    @Test func appleReceiptsVerifyAndParse() throws {
        let verifier = try AppAttestReceiptVerifier()
        let vectors = try Self.vectors()
        #expect(vectors.count == 20)
        for vector in vectors {
            let key = try #require(AppAttestPublicKey(spki: Self.bytes(vector.spkiBase64)))
            let appId = AppAttestAppID(teamId: vector.teamId, bundleId: vector.bundleId)
            let time = Int64(Self.seconds(vector.creationTime).rounded(.up))
            let receipt = try verifier.verify(Self.bytes(vector.receiptBase64), appId: appId, publicKey: key, at: time)
            #expect(receipt.kind.rawValue == vector.type, "\(vector.source)")
            #expect(receipt.riskMetric == vector.riskMetric, "\(vector.source)")
            #expect(abs(receipt.creationTime - Self.seconds(vector.creationTime)) < 0.001, "\(vector.source)")
            #expect(abs(receipt.expirationTime - Self.seconds(vector.expirationTime)) < 0.001, "\(vector.source)")
            #expect(receipt.notBefore.map { abs($0 - Self.seconds(vector.notBefore!)) < 0.001 } ?? (vector.notBefore == nil))
            #expect(receipt.clientHash == Self.bytes(vector.clientHashBase64), "\(vector.source)")
            #expect(receipt.environment == "sandbox")

            let other = AppAttestAppID(teamId: vector.teamId, bundleId: "com.example.other")
            #expect(Self.rule { try verifier.verify(Self.bytes(vector.receiptBase64), appId: other, publicKey: key, at: time) } == .appId)
            #expect(Self.rule { try verifier.verify(Self.bytes(vector.receiptBase64), appId: appId, publicKey: key, at: 1_800_000_000) }
                    == .signature, "the signing certificate has expired by 2027")
        }
    }

    @Test func appleAttestReceiptChecksClientHash() throws {
        let verifier = try AppAttestReceiptVerifier()
        let vector = try #require(try Self.vectors().first { $0.type == "ATTEST" })
        let key = try #require(AppAttestPublicKey(spki: Self.bytes(vector.spkiBase64)))
        let appId = AppAttestAppID(teamId: vector.teamId, bundleId: vector.bundleId)
        let time = Int64(Self.seconds(vector.creationTime).rounded(.up))
        let receipt = Self.bytes(vector.receiptBase64)
        _ = try verifier.verify(receipt, appId: appId, publicKey: key, clientDataHash: Self.bytes(vector.clientHashBase64), at: time)
        #expect(Self.rule { try verifier.verify(receipt, appId: appId, publicKey: key, clientDataHash: [UInt8](repeating: 0, count: 32), at: time) }
                == .clientHash)
        #expect(receipt.starts(with: [0x30, 0x80]), "an indefinite-length BER receipt")
    }

    static let now: Int64 = 1_795_478_400

    struct Simulated {
        let ca: SimulatedAppAttestCA
        let receiptCA: SimulatedReceiptCA
        let device: SimulatedAppAttestDevice
        let appId = AppAttestAppID(teamId: "ABCDE12345", bundleId: "com.example.app")
        let verifier: AppAttestVerifier
        let receiptVerifier: AppAttestReceiptVerifier
        let clientDataHash = [UInt8](repeating: 9, count: 32)

        init() throws {
            ca = try SimulatedAppAttestCA(now: now)
            receiptCA = try SimulatedReceiptCA(now: now)
            device = try SimulatedAppAttestDevice(ca: ca, appId: appId, receiptCA: receiptCA)
            verifier = try AppAttestVerifier(rootCertificatePEM: ca.rootPEM)
            receiptVerifier = try AppAttestReceiptVerifier(rootCertificatePEM: receiptCA.rootPEM)
        }

        func attestation(_ options: SimulatedAppAttestDevice.AttestationOptions = .init()) throws -> AppAttestAttestation {
            try verifier.verifyAttestation(try device.attest(clientDataHash: clientDataHash, now: now, options: options),
                                           keyId: device.keyId, clientDataHash: clientDataHash, appId: appId,
                                           environments: [.production], at: now)
        }

        func rule(_ options: SimulatedAppAttestDevice.AttestationOptions = .init(), at time: Int64 = now) throws -> AppAttestReceiptRule? {
            let attestation = try attestation(options)
            return AppAttestReceiptTests.rule {
                try receiptVerifier.verify(attestation.receipt, appId: appId, publicKey: attestation.publicKey,
                                           clientDataHash: clientDataHash, at: time)
            }
        }
    }

    /// The rule `body` fails with, `nil` when it passes (any other error fails the test).
    static func rule(_ body: () throws -> AppAttestReceipt) -> AppAttestReceiptRule? {
        do { _ = try body(); return nil } catch let failure as AppAttestReceiptFailure { return failure.rule } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func simulatedAttestReceiptVerifies() throws {
        let sim = try Simulated()
        let attestation = try sim.attestation()
        let receipt = try sim.receiptVerifier.verify(attestation.receipt, appId: sim.appId, publicKey: attestation.publicKey,
                                                     clientDataHash: sim.clientDataHash, at: Self.now)
        #expect(receipt.kind == .attest)
        #expect(receipt.riskMetric == nil)
        #expect(receipt.creationTime == Double(Self.now))
        #expect(receipt.appId == sim.appId.string)
    }

    @Test func eachRuleAlone() throws {
        let sim = try Simulated()
        var options = SimulatedAppAttestDevice.AttestationOptions()
        options.receipt = []
        #expect(try sim.rule(options) == .missing)
        options.receipt = Array("simulated receipt".utf8)
        #expect(try sim.rule(options) == .malformed)

        options = .init()
        options.receiptFields = { $0.appId = "ABCDE12345.com.example.other" }
        #expect(try sim.rule(options) == .appId)
        let stranger = try SimulatedAppAttestDevice(ca: sim.ca, appId: sim.appId)
        let strangerLeaf = try sim.ca.issueLeaf(spki: stranger.publicKey.spkiDER, nonce: [UInt8](repeating: 1, count: 32),
                                                notBefore: Self.now - 60, notAfter: Self.now + 3600)
        options.receiptFields = { $0.attestedCertificate = strangerLeaf }
        #expect(try sim.rule(options) == .attestedKey)
        options.receiptFields = { $0.attestedCertificate = Array("not a certificate".utf8) }
        #expect(try sim.rule(options) == .attestedKey)
        options.receiptFields = { $0.clientHash = [UInt8](repeating: 0, count: 32) }
        #expect(try sim.rule(options) == .clientHash)
        options.receiptFields = { $0.kind = "RECEIPT"; $0.clientHash = [0xEF, 0xBF, 0xBD]; $0.riskMetric = 4 }
        #expect(try sim.rule(options) == nil, "field 4 is not compared on refreshed receipts")
        options.receiptFields = { $0.expirationTime = Self.now - 1 }
        #expect(try sim.rule(options) == .expired)
        options.receiptFields = { $0.kind = "OTHER" }
        #expect(try sim.rule(options) == .malformed)
        options.receiptFields = { $0.kind = "RECEIPT"; $0.riskMetric = 7; $0.notBefore = Self.now + 86_400 }
        let refreshed = try sim.attestation(options)
        let parsed = try sim.receiptVerifier.verify(refreshed.receipt, appId: sim.appId, publicKey: refreshed.publicKey, at: Self.now)
        #expect(parsed.riskMetric == 7)
        #expect(parsed.notBefore == Double(Self.now + 86_400))
    }

    @Test func otherRootUnsignedAndTimeRefused() throws {
        let sim = try Simulated()
        #expect(try sim.rule(at: Self.now - 2 * 86_400) == .signature, "before the signing chain is valid")
        let otherCA = try SimulatedReceiptCA(now: Self.now)
        let other = try SimulatedAppAttestDevice(ca: sim.ca, appId: sim.appId, receiptCA: otherCA)
        let object = try other.attest(clientDataHash: sim.clientDataHash, now: Self.now)
        let attestation = try sim.verifier.verifyAttestation(object, keyId: other.keyId, clientDataHash: sim.clientDataHash,
                                                             appId: sim.appId, environments: [.production], at: Self.now)
        #expect(Self.rule { try sim.receiptVerifier.verify(attestation.receipt, appId: sim.appId, publicKey: attestation.publicKey, at: Self.now) }
                == .signature, "signed under another root")
        #expect(Self.rule { try AppAttestReceiptVerifier().verify(attestation.receipt, appId: sim.appId, publicKey: attestation.publicKey, at: Self.now) }
                == .signature, "a simulated receipt is not Apple's")

        let fields = SimulatedReceiptCA.Fields(appId: sim.appId.string, attestedCertificate: [], clientHash: [], now: Self.now)
        let unsigned = try sim.receiptCA.sign(content: SimulatedReceiptCA.payload(fields.entries), signed: false)
        #expect(Self.rule { try sim.receiptVerifier.verifySignature(unsigned, at: Self.now) } == .malformed, "unsigned content")

        let bad = try sim.receiptCA.sign(content: Array("junk, not a SET".utf8))
        #expect(Self.rule { try sim.receiptVerifier.verifySignature(bad, at: Self.now) } == .malformed)
        var missing = fields.entries
        missing.removeAll { $0.0 == 12 }
        let noCreation = try sim.receiptCA.sign(content: SimulatedReceiptCA.payload(missing))
        #expect(Self.rule { try sim.receiptVerifier.verifySignature(noCreation, at: Self.now) } == .malformed)
        let twice = try sim.receiptCA.sign(content: SimulatedReceiptCA.payload(fields.entries + [(2, Array("x".utf8))]))
        #expect(Self.rule { try sim.receiptVerifier.verifySignature(twice, at: Self.now) } == .malformed)
    }

    @Test func hostileBytesNeverCrash() throws {
        let sim = try Simulated()
        let good = try sim.attestation().receipt
        let apple = Self.bytes(try Self.vectors()[0].receiptBase64)
        let verifier = try AppAttestReceiptVerifier()
        for (receipt, trusting) in [(good, sim.receiptVerifier), (apple, verifier)] {
            // Every proper prefix fails (never crashes), and so do trailing bytes and single flipped bytes.
            for length in stride(from: 0, to: receipt.count, by: max(1, receipt.count / 400)) {
                #expect(Self.rule { try trusting.verifySignature(Array(receipt.prefix(length)), at: Self.now) } != nil)
            }
            #expect(Self.rule { try trusting.verifySignature(receipt + [0], at: Self.now) } == .malformed)
            for index in stride(from: 0, to: receipt.count, by: max(1, receipt.count / 200)) {
                var flipped = receipt
                flipped[index] ^= 0x5A
                _ = Self.rule { try trusting.verifySignature(flipped, at: Self.now) }
            }
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let junk = (0..<Int.random(in: 0..<600, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(Self.rule { try sim.receiptVerifier.verifySignature(junk, at: Self.now) } != nil)
        }
        #expect(Self.rule { try sim.receiptVerifier.verifySignature([UInt8](repeating: 0x30, count: 40_000), at: Self.now) } == .malformed)
    }
}
