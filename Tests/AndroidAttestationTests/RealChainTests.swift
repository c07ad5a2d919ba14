import Foundation
import Testing
@testable import AndroidAttestation

/// The chain rules on real devices' chains (Vectors/README.md) against Google's built-in roots, with an injected
/// clock: accepted inside every certificate's validity, refused before and after it.
@Suite struct RealChainTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        /// A time inside every certificate's validity (all but a presented root, which is set aside).
        let time: Int64
        /// Just before the newest notBefore, and just after the first notAfter below the root.
        let before: Int64, after: Int64
        var description: String { name }
    }

    static let accepted: [Case] = [
        // Pixel 9a under the 2026 ECDSA P-384 root (RKP), TEE and StrongBox.
        Case(name: "tegu_sdk36_TEE_EC_2026_ROOT", time: 1_772_000_000, before: 1_771_718_700, after: 1_772_929_600),
        Case(name: "tegu_sdk36_SB_EC_2026_ROOT", time: 1_772_000_000, before: 1_771_718_800, after: 1_772_760_000),
        // Pixel 9 Pro RKP chains to the RSA root.
        Case(name: "caiman_sdk36_TEE_EC_RKP", time: 1_759_000_000, before: 1_758_820_300, after: 1_759_505_500),
        Case(name: "caiman_sdk36_SB_EC_RKP", time: 1_759_000_000, before: 1_758_840_700, after: 1_759_505_500),
        // A factory chain whose intermediate is CA:FALSE with no keyCertSign (the legacy leniency).
        Case(name: "sony-xperia10-iii_sdk33_TEE_EC", time: 1_700_000_000, before: 1_464_283_000, after: 1_779_643_200),
    ]

    static func policy(_ name: String) throws -> (AndroidAttestationPolicy, [UInt8]) {
        let expected = try VectorSupport.expected(name)
        let software = expected["softwareEnforced"] as? [String: Any] ?? [:]
        let application = software["attestationApplicationId"] as? [String: Any] ?? [:]
        let package = (application["packages"] as? [[String: String]])?.first?["name"] ?? ""
        let digests = try (application["signatures"] as? [String] ?? []).map(VectorSupport.base64)
        let challenge = try VectorSupport.base64(expected["attestationChallenge"] as? String ?? "")
        return (AndroidAttestationPolicy(packageName: package, signingCertificateDigests: digests), challenge)
    }

    @Test(arguments: accepted)
    func acceptedAtTheirRecordedTime(_ vector: Case) throws {
        let verifier = try AndroidAttestationVerifier()
        let chain = try VectorSupport.chain(vector.name)
        let (policy, challenge) = try Self.policy(vector.name)
        let key = try verifier.verify(chain: chain, challenge: challenge, policy: policy, statusList: .empty, at: vector.time)
        #expect(key.uncompressedPoint.count == 65)
        // The root may be left out: the same chain without its top certificate verifies too.
        _ = try verifier.verify(chain: Array(chain.dropLast()), challenge: challenge, policy: policy, statusList: .empty, at: vector.time)
        for time in [vector.before, vector.after] {
            do {
                _ = try verifier.verify(chain: chain, challenge: challenge, policy: policy, statusList: .empty, at: time)
                Issue.record("\(vector.name) accepted at \(time)")
            } catch {
                #expect(error.rule == .chainUntrusted, "\(vector.name) at \(time): \(error)")
            }
        }
    }

    @Test func refusedForWhatTheyAre() throws {
        let verifier = try AndroidAttestationVerifier()
        func rule(_ name: String, _ time: Int64, _ adjust: (inout AndroidAttestationPolicy) -> Void = { _ in },
                  status: AndroidStatusList = .empty, challenge: [UInt8]? = nil) throws -> AndroidAttestationRule? {
            var (policy, expected) = try Self.policy(name)
            adjust(&policy)
            let chain = try VectorSupport.chain(name)
            do {
                _ = try verifier.verify(chain: chain, challenge: challenge ?? expected, policy: policy, statusList: status, at: time)
                return nil
            } catch { return error.rule }
        }
        // Pixel XL: a software attestation root, not Google's.
        #expect(try rule("marlin_sdk29_TEE_EC_NONE", 1_600_000_000) == .chainUntrusted)
        // Pixel 3 and Pixel 8a test devices: bootloader unlocked. (Pixel 3 at 2023: the built-in RSA root is the 2022
        // issue of Google's key, and OpenSSL checks a trusted root's validity too.)
        let blueline = try rule("blueline_sdk28_TEE_EC_NONE", 1_700_000_000)
        #expect(blueline == .deviceUnlocked, "\(String(describing: blueline))")
        #expect(try rule("akita_sdk34_TEE_RSA_NONE", 1_727_000_000) == .deviceUnlocked)
        // A TEE chain where StrongBox is required; a StrongBox one passes.
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000, { $0.requireStrongBox = true }) == .strongBoxRequired)
        #expect(try rule("tegu_sdk36_SB_EC_2026_ROOT", 1_772_000_000, { $0.requireStrongBox = true }) == nil)
        // Patch level 202602 against a minimum of 202603, and 202602 itself.
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000, { $0.minimumPatchLevel = 202_603 }) == .patchLevel)
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000, { $0.minimumPatchLevel = 202_602 }) == nil)
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000, { $0.packageName = "com.example.other" }) == .packageName)
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000, { $0.signingCertificateDigests = [[UInt8](repeating: 7, count: 32)] }) == .signingCertificate)
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000, challenge: Array("another challenge".utf8)) == .challenge)
        // The status list, keyed as Google keys it: the RKP intermediate "Droid CA3" of the 2026 chain.
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000,
                         status: AndroidStatusList(entries: ["303a8d67c45a0dda7b0dafbc092f5a824a02ec": .revoked])) == .certificateRevoked)
        #expect(try rule("tegu_sdk36_TEE_EC_2026_ROOT", 1_772_000_000,
                         status: AndroidStatusList(entries: ["2C85CDC15C3042F25698906669C35137": .suspended])) == .certificateSuspended)
        // A factory serial with a leading zero nibble in DER (0388266760658996859e) is listed without it.
        #expect(try rule("caiman_sdk36_TEE_EC_RKP", 1_759_000_000,
                         status: AndroidStatusList(entries: ["388266760658996860d": .revoked])) == .certificateRevoked)
    }

    @Test func googleRootsAreBuiltIn() throws {
        let roots = AndroidCertificate.all(pem: AndroidRootCA.googlePEM)
        #expect(roots.count == 2)
        #expect(roots.map { $0.serialHex() } == ["f1c172a699eaf51d", "84a9d0297b0eb58ae7ff0e80de760605"])
        #expect(roots.allSatisfy { $0.isSelfSigned })
    }
}

/// Google's own status-list test data (google/android-key-attestation): the list's keys are the serials as
/// `BigInteger.toString(16)` writes them, and a real certificate's serial (DER with a leading zero octet) is found.
@Suite struct GoogleStatusListVectorTests {
    @Test func aRealCertificateIsFoundSuspended() throws {
        let json = try Data(contentsOf: try VectorSupport.url("android-key-attestation_status.json"))
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        let entries = try #require(object["entries"] as? [String: [String: String]])
        var statuses: [String: AndroidStatusList.Status] = [:]
        for (serial, entry) in entries { statuses[serial] = AndroidStatusList.Status(rawValue: entry["status"] ?? "") }
        let list = AndroidStatusList(entries: statuses)
        #expect(list.entries.count == 5)
        let der = try #require(try VectorSupport.chain("android-key-attestation_suspended-cert").first)
        let certificate = try #require(AndroidCertificate(der: der))
        #expect(certificate.serialHex() == "cc66e9a93713b6e643b26c15879786f7")
        #expect(list.status(ofSerial: try #require(certificate.serialHex())) == .suspended)
        #expect(list.status(ofSerial: "badbeef") == nil)
        #expect(list.status(ofSerial: "8350192447815228107") == .revoked)
    }
}
