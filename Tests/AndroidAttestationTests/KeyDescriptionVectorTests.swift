import Foundation
import Testing
@testable import AndroidAttestation

/// The KeyDescription parser on real devices' leaves, held to Google's expected parse results (Vectors/README.md).
@Suite struct KeyDescriptionVectorTests {
    static let names = ["tegu_sdk36_TEE_EC_2026_ROOT", "tegu_sdk36_SB_EC_2026_ROOT", "caiman_sdk36_TEE_EC_RKP",
                        "caiman_sdk36_SB_EC_RKP", "sony-xperia10-iii_sdk33_TEE_EC", "blueline_sdk28_TEE_EC_NONE",
                        "akita_sdk34_TEE_RSA_NONE", "marlin_sdk29_TEE_EC_NONE"]

    static func extensionValue(_ name: String) throws -> [UInt8] {
        let chain = try VectorSupport.chain(name)
        guard let leaf = chain.first.flatMap(AndroidCertificate.init(der:)) else { throw VectorError("\(name): no leaf") }
        let values = leaf.extensionValues(oid: KeyDescription.oid)
        guard values.count == 1 else { throw VectorError("\(name): \(values.count) KeyDescriptions") }
        return values[0]
    }

    static func level(_ text: Any?) -> SecurityLevel? {
        switch text as? String {
        case "SOFTWARE": .software
        case "TRUSTED_ENVIRONMENT": .trustedEnvironment
        case "STRONG_BOX": .strongBox
        default: nil
        }
    }

    @Test(arguments: names)
    func parsesAsGoogleDoes(name: String) throws {
        let expected = try VectorSupport.expected(name)
        let description = try KeyDescription(der: try Self.extensionValue(name))
        #expect(description.attestationVersion == Int64(expected["attestationVersion"] as? String ?? ""))
        #expect(description.keyMintVersion == Int64(expected["keyMintVersion"] as? String ?? ""))
        #expect(description.attestationSecurityLevel == Self.level(expected["attestationSecurityLevel"]))
        #expect(description.keyMintSecurityLevel == Self.level(expected["keyMintSecurityLevel"]))
        #expect(description.attestationChallenge == (try VectorSupport.base64(expected["attestationChallenge"] as? String ?? "")))
        let hardware = expected["hardwareEnforced"] as? [String: Any] ?? [:]
        let software = expected["softwareEnforced"] as? [String: Any] ?? [:]
        #expect((description.hardwareEnforced.origin ?? description.softwareEnforced.origin) == 0)
        #expect(description.hardwareEnforced.osPatchLevel == (hardware["osPatchLevel"] as? String).flatMap { Int64($0) })
        #expect(description.hardwareEnforced.osVersion == (hardware["osVersion"] as? String).flatMap { Int64($0) })
        if let rot = hardware["rootOfTrust"] as? [String: Any] {
            let parsed = try #require(description.hardwareEnforced.rootOfTrust)
            #expect(parsed.deviceLocked == (rot["deviceLocked"] as? Bool))
            let states = ["VERIFIED": VerifiedBootState.verified, "SELF_SIGNED": .selfSigned, "UNVERIFIED": .unverified, "FAILED": .failed]
            #expect(parsed.verifiedBootState == states[rot["verifiedBootState"] as? String ?? ""])
            #expect(parsed.verifiedBootKey == (try VectorSupport.base64(rot["verifiedBootKey"] as? String ?? "")))
        } else {
            #expect(description.hardwareEnforced.rootOfTrust == nil)
        }
        let applicationJSON = try #require((software["attestationApplicationId"] ?? hardware["attestationApplicationId"]) as? [String: Any])
        let application = try #require(description.attestationApplicationID)
        let packages = applicationJSON["packages"] as? [[String: String]] ?? []
        #expect(application.packages.map { String(decoding: $0.name, as: UTF8.self) } == packages.map { $0["name"] ?? "" })
        #expect(application.packages.map(\.version) == packages.map { Int64($0["version"] ?? "") ?? -1 })
        let digests = try (applicationJSON["signatures"] as? [String] ?? []).map(VectorSupport.base64)
        #expect(application.signatureDigests == digests)
    }

    /// Byte by byte: every proper prefix of a real KeyDescription is `.truncated`, never another verdict.
    @Test func realPrefixesAreTruncated() throws {
        let value = try Self.extensionValue("tegu_sdk36_TEE_EC_2026_ROOT")
        for length in 0..<value.count {
            do {
                _ = try KeyDescription(der: Array(value.prefix(length)))
                Issue.record("prefix \(length) parsed")
            } catch {
                #expect(error.kind == .truncated, "prefix \(length): \(error)")
            }
        }
    }

    /// Every single-byte change of a real KeyDescription either still parses or throws a `DERError`; none crashes.
    @Test func everyByteFlippedIsHandled() throws {
        let value = try Self.extensionValue("caiman_sdk36_TEE_EC_RKP")
        var refused = 0
        for index in value.indices {
            var changed = value
            changed[index] ^= 0xA5
            do { _ = try KeyDescription(der: changed) } catch { refused += 1 }
        }
        #expect(refused > value.count / 4)
    }

    @Test func upstreamInvalidVectors() throws {
        let unordered = try VectorSupport.chain("invalid_tags_not_in_ascending_order")
        let leaf = try #require(unordered.first.flatMap(AndroidCertificate.init(der:)))
        #expect(throws: DERError.self) { _ = try KeyDescription(der: leaf.extensionValues(oid: KeyDescription.oid).first ?? []) }
        do {
            _ = try KeyDescription(der: leaf.extensionValues(oid: KeyDescription.oid).first ?? [])
        } catch {
            #expect(error.kind == .unorderedTags)
        }
        // deviceLocked encoded as BOOLEAN 0x01: BER, not DER. Google's parser takes it as true; this one refuses.
        let rot = try VectorSupport.chain("invalid_malformed_rot_device_locked")
        let rotLeaf = try #require(rot.first.flatMap(AndroidCertificate.init(der:)))
        do {
            _ = try KeyDescription(der: rotLeaf.extensionValues(oid: KeyDescription.oid).first ?? [])
            Issue.record("malformed deviceLocked parsed")
        } catch {
            #expect(error.kind == .invalidBoolean)
        }
    }
}
