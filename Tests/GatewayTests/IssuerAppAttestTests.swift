import AppAttest
import AppAttestSimulator
import AppCheck
import Foundation
@testable import Gateway
@testable import GatewayConfig
@testable import Issuer
import ReplayStores
import TestSupport
import Testing

/// The App Attest exchanges of the issuer core (docs/issuer.md) driven by a simulated iPhone: attest, assert,
/// and each refusal a client can cause, with real certificates, keys and CBOR, and SQLite state.
@Suite struct IssuerAppAttestTests {
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"

    final class Rig: @unchecked Sendable {
        let phone: SimulatedIPhone
        let service: IssuerService
        let statePath: String
        init(environments: [AppAttestEnvironment] = [.production], phoneEnvironment: AppAttestEnvironment = .production) throws {
            phone = try SimulatedIPhone(environment: phoneEnvironment)
            statePath = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-\(UUID().uuidString).sqlite").path
            var settings = IssuerSettings()
            settings.issuerURL = "https://api.example.com/appcheck"
            var app = IssuerAppSettings(appId: IssuerAppAttestTests.appId)
            app.teamId = "ABCDE12345"
            app.bundleId = "com.example.app"
            var attest = AppAttestAppSettings()
            attest.environments = environments
            attest.rootCAFile = phone.rootCAPath
            app.appAttest = attest
            settings.apps = [app]
            service = try IssuerService(settings: settings, projectNumber: "123456789012", projectId: nil,
                                        keys: try IssuerKeys([(kid: "k1", key: try RSAPrivateKey.generate())]),
                                        state: try SQLiteIssuerState(path: statePath))
        }
        deinit {
            phone.cleanUp()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: statePath + suffix) }
        }

        func call(_ method: String, _ body: String) async -> IssuerOutcome {
            let path = IssuerPath.match("/appcheck/v1/projects/123456789012/apps/\(IssuerAppAttestTests.appId):\(method)"[...],
                                        basePath: "/appcheck")!
            return await service.handle(path, httpMethod: "POST", body: Array(body.utf8))
        }

        func challenge() async throws -> [UInt8] {
            let outcome = await call("generateAppAttestChallenge", "")
            return try #require(IssuerJSON.decodeBase64(try StrictJSON.parse(outcome.body).member("challenge")?.stringValue ?? ""))
        }

        /// Attests and returns the artifact.
        func attest(options: SimulatedAppAttestDevice.AttestationOptions = .init()) async throws -> (IssuerOutcome, [UInt8]) {
            let c = try await challenge()
            let body = #"{"key_id":"\#(phone.keyIdBase64)","attestation":"\#(try phone.attestationBase64(challenge: c, options: options))","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#
            let outcome = await call("exchangeAppAttestAttestation", body)
            let artifact = (try? StrictJSON.parse(outcome.body).member("artifact")?.stringValue).flatMap { $0.flatMap(IssuerJSON.decodeBase64) } ?? []
            return (outcome, artifact)
        }

        func assert(_ artifact: [UInt8], limitedUse: Bool = false,
                    options: SimulatedAppAttestDevice.AssertionOptions = .init()) async throws -> IssuerOutcome {
            let c = try await challenge()
            let assertion = try phone.assertionBase64(artifact: artifact, challenge: c, options: options)
            return await call("exchangeAppAttestAssertion",
                              #"{"artifact":"\#(IssuerJSON.encodeBase64(artifact))","assertion":"\#(assertion)","challenge":"\#(IssuerJSON.encodeBase64(c))","limitedUse":\#(limitedUse)}"#)
        }
    }

    func claims(_ outcome: IssuerOutcome, _ service: IssuerService, path: [String] = ["token"]) throws -> VerifiedClaims {
        var value = try StrictJSON.parse(outcome.body)
        for p in path.dropLast() { value = try #require(value.member(p)) }
        let token = try #require(value.member(path.last!)?.stringValue)
        let policy = AppCheckPolicy(projectNumber: "123456789012").withIssuer(service.tokenIssuer)
        return try AppCheckVerifier.verify(token: Array(token.utf8), keys: service.keys.keySet, policy: policy,
                                           now: Date().timeIntervalSince1970).get()
    }

    @Test func attestThenAssertMintsTokens() async throws {
        let rig = try Rig()
        let (attested, artifact) = try await rig.attest()
        #expect(attested.status == 200, "\(attested.rule)")
        #expect(artifact == rig.phone.device.keyId)
        let first = try claims(attested, rig.service, path: ["appCheckToken", "token"])
        #expect(first.provider == "app_attest" && first.appId == Self.appId && first.lifetime == 3600)

        let asserted = try await rig.assert(artifact, limitedUse: true)
        #expect(asserted.status == 200, "\(asserted.rule)")
        #expect(try claims(asserted, rig.service).lifetime == 300)
        #expect(try await rig.assert(artifact).status == 200, "the next counter passes too")
    }

    @Test func refusalsNameTheirRule() async throws {
        let rig = try Rig()
        // A challenge never issued.
        let forged = #"{"key_id":"\#(rig.phone.keyIdBase64)","attestation":"\#(try rig.phone.attestationBase64(challenge: [1, 2, 3]))","challenge":"AQID"}"#
        #expect(await rig.call("exchangeAppAttestAttestation", forged).rule == "challenge_unknown")
        // A counter other than 0 in the attestation.
        var counter = SimulatedAppAttestDevice.AttestationOptions()
        counter.counter = 1
        #expect(try await rig.attest(options: counter).0.rule == "counter")
        // Garbage evidence is 400.
        let c = try await rig.challenge()
        let garbage = await rig.call("exchangeAppAttestAttestation",
                                     #"{"key_id":"\#(rig.phone.keyIdBase64)","attestation":"AAAA","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#)
        #expect((garbage.status, garbage.rule) == (400, "malformed"))

        let (ok, artifact) = try await rig.attest()
        #expect(ok.status == 200)
        #expect(try await rig.attest().0.rule == "key_already_attested")
        // An assertion replaying a counter already used.
        #expect(try await rig.assert(artifact).status == 200)
        var same = SimulatedAppAttestDevice.AssertionOptions()
        same.counter = 1
        let replayed = try await rig.assert(artifact, options: same)
        #expect((replayed.status, replayed.rule) == (403, "counter_repeated"))
        // An artifact naming no stored key.
        #expect(try await rig.assert([UInt8](repeating: 9, count: 32)).rule == "unknown_artifact")
        // Another app's rpId.
        var other = SimulatedAppAttestDevice.AssertionOptions()
        other.appId = "ABCDE12345.com.example.other"
        #expect(try await rig.assert(artifact, options: other).rule == "rp_id_hash")
    }

    @Test func theEnvironmentMustBeAllowed() async throws {
        let rig = try Rig(environments: [.production], phoneEnvironment: .development)
        let (outcome, _) = try await rig.attest()
        #expect((outcome.status, outcome.rule) == (403, "environment"))
    }

    @Test func sameCounterAssertionsMintExactlyOnce() async throws {
        let rig = try Rig()
        let (_, artifact) = try await rig.attest()
        var fixed = SimulatedAppAttestDevice.AssertionOptions()
        fixed.counter = 5
        let options = fixed
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 { group.addTask { try await rig.assert(artifact, options: options).status } }
            var all: [Int] = []
            for try await s in group { all.append(s) }
            return all
        }
        #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
        #expect(statuses.filter { $0 == 403 }.count == 7)
    }

    /// AppCheckCore's concurrent assertions (counters n+1 and n+2) may arrive in either order: both mint, each once;
    /// a counter more than 64 below the highest is refused.
    @Test func outOfOrderCountersMintOnceEach() async throws {
        let rig = try Rig()
        let (_, artifact) = try await rig.attest()
        func assertion(_ counter: UInt32) async throws -> (Int, String) {
            var options = SimulatedAppAttestDevice.AssertionOptions()
            options.counter = counter
            let outcome = try await rig.assert(artifact, options: options)
            return (outcome.status, outcome.rule)
        }
        #expect(try await assertion(2) == (200, ""))
        #expect(try await assertion(1) == (200, ""), "the later-arriving lower counter")
        #expect(try await assertion(1) == (403, "counter_repeated"))
        #expect(try await assertion(2) == (403, "counter_repeated"))
        #expect(try await assertion(100) == (200, ""))
        #expect(try await assertion(35) == (403, "counter_below_window"))
        #expect(try await assertion(36) == (200, ""))
    }
}
