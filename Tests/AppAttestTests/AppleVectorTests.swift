import AppAttest
import Testing

@Suite struct AppleVectorTests {
    let verifier: AppAttestVerifier
    let vectors: [AppleVector]

    init() throws {
        verifier = try AppAttestVerifier()
        vectors = try AppleVector.all()
    }

    var attestations: [AppleVector] { vectors.filter { $0.type == "attestation" } }
    var assertions: [AppleVector] { vectors.filter { $0.type == "assertion" } }

    func environment(_ vector: AppleVector) throws -> AppAttestEnvironment {
        try #require(AppAttestEnvironment(rawValue: vector.environment))
    }

    @Test func allVectorsArePresent() {
        #expect(attestations.count == 10)
        #expect(assertions.count == 8)
    }

    @Test func everyAttestationVerifiesAtItsRecordedTime() throws {
        for vector in attestations {
            let time = try #require(vector.validationTime, "\(vector.id)")
            let result = try verifier.verifyAttestation(vector.object, keyId: vector.keyId, clientDataHash: vector.clientDataHash,
                                                        appId: vector.appId, environments: [try environment(vector)], at: time)
            #expect(result.publicKey.uncompressedPoint == vector.publicKeyPoint, "\(vector.id)")
            #expect(result.keyId == vector.keyId)
            #expect(result.environment.rawValue == vector.environment)
            #expect(result.receipt.count > 1000, "\(vector.id): the receipt is returned")
        }
    }

    @Test func apple2026SampleCarriesExtensionsWithoutTheEDFlag() throws {
        let vector = try #require(vectors.first { $0.id == "apple/validation-guide-2026/attestation" })
        let result = try verifier.verifyAttestation(vector.object, keyId: vector.keyId, clientDataHash: vector.clientDataHash,
                                                    appId: vector.appId, environments: [.production], at: try #require(vector.validationTime))
        let extensions = try #require(result.extensions)
        #expect(extensions[text: "apple_bundle_version_01"] == .text("1"))
        #expect(extensions[text: "apple_validation_category_01"] == .bytes([1, 0, 0, 0]))
    }

    @Test func everyAttestationFailsNowOnItsExpiredLeaf() throws {
        let now: Int64 = 1_795_478_400 // 2026-11-23T00:00:00Z
        for vector in attestations {
            let error = #expect(throws: AppAttestFailure.self, "\(vector.id)") {
                try verifier.verifyAttestation(vector.object, keyId: vector.keyId, clientDataHash: vector.clientDataHash,
                                               appId: vector.appId, environments: [try environment(vector)], at: now)
            }
            #expect(error?.rule == .certificateChain, "\(vector.id)")
        }
    }

    @Test func eachAttestationRuleBrokenAlone() throws {
        let vector = try #require(vectors.first { $0.id == "uebelack/attestation-production" })
        let time = try #require(vector.validationTime)
        func rule(keyId: [UInt8]? = nil, clientDataHash: [UInt8]? = nil, appId: AppAttestAppID? = nil,
                  environments: Set<AppAttestEnvironment> = [.production], time: Int64, root: String? = nil) -> AppAttestRule? {
            do {
                let verifier = try root.map { try AppAttestVerifier(rootCertificatePEM: $0) } ?? self.verifier
                _ = try verifier.verifyAttestation(vector.object, keyId: keyId ?? vector.keyId, clientDataHash: clientDataHash ?? vector.clientDataHash,
                                                   appId: appId ?? vector.appId, environments: environments, at: time)
                return nil
            } catch let failure as AppAttestFailure { return failure.rule } catch { return nil }
        }
        #expect(rule(time: time) == nil)
        var flipped = vector.clientDataHash
        flipped[0] ^= 1
        #expect(rule(clientDataHash: flipped, time: time) == .nonce)
        var otherKey = vector.keyId
        otherKey[31] ^= 1
        #expect(rule(keyId: otherKey, time: time) == .keyId)
        #expect(rule(appId: AppAttestAppID(teamId: "AAAAAAAAAA", bundleId: vector.bundleId), time: time) == .rpIdHash)
        #expect(rule(environments: [.development], time: time) == .environment)
        #expect(rule(environments: [], time: time) == .environment)
        #expect(rule(time: time - 86_400 * 3) == .certificateChain, "before the leaf's notBefore")
        // Another root (a valid CA, just not Apple's) refuses Apple's chain.
        #expect(rule(time: time, root: otherRootPEM) == .certificateChain)
    }

    @Test func everyAssertionVerifiesAndReportsItsCounter() throws {
        for vector in assertions {
            let key = try #require(vector.publicKeyPoint.flatMap(AppAttestPublicKey.init(uncompressedPoint:)), "\(vector.id)")
            #expect(key.keyId == vector.keyId, "\(vector.id)")
            let result = try verifier.verifyAssertion(vector.object, clientData: vector.clientData, publicKey: key, appId: vector.appId)
            #expect(Int(result.counter) == vector.expected.counter, "\(vector.id)")
            let previous = try #require(vector.previousCounter)
            #expect(AppAttestCounter.accepts(presented: result.counter, stored: previous))
            #expect(!AppAttestCounter.accepts(presented: result.counter, stored: result.counter), "a replay")
        }
    }

    @Test func eachAssertionRuleBrokenAlone() throws {
        let vector = try #require(vectors.first { $0.id == "veehaitch/ios-14.2/assertion" })
        let key = try #require(vector.publicKeyPoint.flatMap(AppAttestPublicKey.init(uncompressedPoint:)))
        func rule(_ object: [UInt8]? = nil, clientData: [UInt8]? = nil, key: AppAttestPublicKey, appId: AppAttestAppID? = nil) -> AppAttestRule? {
            do {
                _ = try verifier.verifyAssertion(object ?? vector.object, clientData: clientData ?? vector.clientData,
                                                 publicKey: key, appId: appId ?? vector.appId)
                return nil
            } catch let failure as AppAttestFailure { return failure.rule } catch { return nil }
        }
        #expect(rule(key: key) == nil)
        #expect(rule(clientData: vector.clientData + [0x21], key: key) == .signature)
        var object = vector.object
        object[object.count - 1] ^= 1 // inside authenticatorData (the last member)
        #expect(rule(object, key: key) == .signature)
        let otherKey = try #require(vectors.first { $0.id == "veehaitch/ios-14.3/assertion" }?.publicKeyPoint.flatMap(AppAttestPublicKey.init(uncompressedPoint:)))
        #expect(rule(key: otherKey) == .signature)
        #expect(rule(key: key, appId: AppAttestAppID(teamId: "AAAAAAAAAA", bundleId: vector.bundleId)) == .rpIdHash)
        #expect(rule(Array(vector.object.dropLast()), key: key) == .malformed)
        #expect(rule(vector.object + [0], key: key) == .malformed)
    }
}

/// A self-signed P-384 CA that is not Apple's (made once with `openssl req -x509`; only its public half).
let otherRootPEM = """
-----BEGIN CERTIFICATE-----
MIIBzzCCAVagAwIBAgIUWbAK+pXBkQcxSkbImXleyP49188wCgYIKoZIzj0EAwIw
HjEcMBoGA1UEAwwTTm90IEFwcGxlIFRlc3QgUm9vdDAgFw0yNjExMjMyMTMzMDha
GA8yMTI2MTAzMDIxMzMwOFowHjEcMBoGA1UEAwwTTm90IEFwcGxlIFRlc3QgUm9v
dDB2MBAGByqGSM49AgEGBSuBBAAiA2IABEhIrZgfVwOJ9BXSDfSn5m+JTs+aeiBX
LMAl5xmg4NoaLDYLxjt+uwjBSkp06Itc8Mp5BJSJdMf46R3D3GRUS4AN9ES1T2wd
G97ZzyUMueu9+ab/zBkuCuyUn4yL+uwnx6NTMFEwHQYDVR0OBBYEFEwd85cr3YBo
ZYiG2LI0S0CsSeAzMB8GA1UdIwQYMBaAFEwd85cr3YBoZYiG2LI0S0CsSeAzMA8G
A1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDZwAwZAIwFxDyc9feZOu5rBTpkHzT
69XjJaZLv8i4P+1nPDPhTMxflHvftcGakSfRmV8p1BisAjBauyJQxLbqB8pm+mRH
812kDA8QmdfKj1l8oOxGHDIeWM9wvyHYWvr4PBxlEHmBkmg=
-----END CERTIFICATE-----
"""
