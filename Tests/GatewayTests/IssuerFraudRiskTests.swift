import AppAttest
import AppAttestSimulator
import AppCheck
import Foundation
import ReplayStores
import Testing
import TestSupport
@testable import Gateway
@testable import GatewayConfig
@testable import Issuer

/// Fraud risk in the issuer core (docs/issuer.md "Fraud risk"): the attestation's receipt is verified and kept
/// with the key (a bad one is dropped, never a refusal), `max_risk_metric` refuses assertions from keys above it,
/// and minted tokens carry the metric as `risk` when known.
@Suite struct IssuerFraudRiskTests {
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"

    final class Rig: @unchecked Sendable {
        let phone: SimulatedIPhone
        let service: IssuerService
        let state: SQLiteIssuerState
        let statePath: String
        init(trustReceipts: Bool = true, configure: (inout IssuerAppSettings) -> Void = { _ in }) throws {
            phone = try SimulatedIPhone()
            statePath = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-\(UUID().uuidString).sqlite").path
            var settings = IssuerSettings()
            settings.issuerURL = "https://api.example.com/appcheck"
            var app = IssuerAppSettings(appId: IssuerFraudRiskTests.appId)
            app.teamId = "ABCDE12345"
            app.bundleId = "com.example.app"
            var attest = AppAttestAppSettings()
            attest.rootCAFile = phone.rootCAPath
            if trustReceipts { attest.receiptRootCAFile = phone.receiptRootCAPath }
            app.appAttest = attest
            configure(&app)
            settings.apps = [app]
            state = try SQLiteIssuerState(path: statePath)
            service = try IssuerService(settings: settings, projectNumber: "123456789012", projectId: nil,
                                        keys: try IssuerKeys([(kid: "k1", key: try RSAPrivateKey.generate())]), state: state)
        }
        deinit {
            phone.cleanUp()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: statePath + suffix) }
        }

        func call(_ method: String, _ body: String) async -> IssuerOutcome {
            let path = IssuerPath.match("/appcheck/v1/projects/123456789012/apps/\(IssuerFraudRiskTests.appId):\(method)"[...],
                                        basePath: "/appcheck")!
            return await service.handle(path, httpMethod: "POST", body: Array(body.utf8))
        }

        func challenge() async throws -> [UInt8] {
            let outcome = await call("generateAppAttestChallenge", "")
            return try #require(IssuerJSON.decodeBase64(try StrictJSON.parse(outcome.body).member("challenge")?.stringValue ?? ""))
        }

        func attest(options: SimulatedAppAttestDevice.AttestationOptions = .init()) async throws -> IssuerOutcome {
            let c = try await challenge()
            let body = #"{"key_id":"\#(phone.keyIdBase64)","attestation":"\#(try phone.attestationBase64(challenge: c, options: options))","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#
            return await call("exchangeAppAttestAttestation", body)
        }

        func assert() async throws -> IssuerOutcome {
            let artifact = phone.device.keyId
            let c = try await challenge()
            let assertion = try phone.assertionBase64(artifact: artifact, challenge: c)
            return await call("exchangeAppAttestAssertion",
                              #"{"artifact":"\#(IssuerJSON.encodeBase64(artifact))","assertion":"\#(assertion)","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#)
        }

        func stored() async throws -> AttestedKey { try #require(try await state.key(phone.device.keyId, appId: IssuerFraudRiskTests.appId)) }

        func setMetric(_ metric: Int?) async throws {
            let key = try await stored()
            #expect(try await state.storeReceipt(key.keyId, appId: key.appId, receipt: key.receipt, riskMetric: metric,
                                                 notBefore: nil, refreshAt: nil))
        }
    }

    /// The `risk` claim of the token in `outcome` (`path` to it), nil when absent.
    static func risk(_ outcome: IssuerOutcome, path: [String] = ["token"]) throws -> Int?? {
        var value = try StrictJSON.parse(outcome.body)
        for p in path { value = try #require(value.member(p)) }
        let token = try #require(value.stringValue)
        let payload = try #require(Base64URL.decode(String(token.split(separator: ".")[1])))
        guard let claim = try StrictJSON.parse(payload).member("risk") else { return .none }
        guard case .number(let n, isInteger: true) = claim else { return .some(nil) }
        return .some(Int(n))
    }

    @Test func aVerifiedReceiptIsKeptWithTheKey() async throws {
        let rig = try Rig()
        let attested = try await rig.attest()
        #expect(attested.status == 200, "\(attested.rule)")
        let key = try await rig.stored()
        let verifier = try AppAttestReceiptVerifier(rootCertificatePEM: rig.phone.receiptCA.rootPEM)
        let receipt = try verifier.verifySignature(key.receipt, at: Int64(Date().timeIntervalSince1970))
        #expect(receipt.kind == .attest)
        #expect(key.riskMetric == nil && key.receiptRefreshAt == nil, "no metric yet; no DeviceCheck key, so no refresh")
        #expect(try Self.risk(attested, path: ["appCheckToken", "token"]) == .none, "no risk claim while unknown")
    }

    @Test func aBadReceiptIsDroppedAndTheAttestationStillPasses() async throws {
        let rig = try Rig()
        var options = SimulatedAppAttestDevice.AttestationOptions()
        options.receiptFields = { $0.appId = "ABCDE12345.com.example.other" }
        let attested = try await rig.attest(options: options)
        #expect(attested.status == 200, "\(attested.rule)")
        #expect(try await rig.stored().receipt.isEmpty)

        let apple = try Rig(trustReceipts: false)
        #expect(try await apple.attest().status == 200, "a receipt not signed under Apple Root CA - G3 is dropped")
        #expect(try await apple.stored().receipt.isEmpty)
    }

    /// One rule for an attestation without a receipt (issue 39, docs/issuer.md "Fraud risk"): an absent
    /// `attStmt.receipt` is an empty one, so both are accepted and the key is kept without a receipt (logged
    /// `receipt_missing`).
    @Test func anAbsentAndAnEmptyReceiptFollowOneRule() async throws {
        for (name, options) in [("empty", { var o = SimulatedAppAttestDevice.AttestationOptions(); o.receipt = []; return o }()),
                                ("absent", { var o = SimulatedAppAttestDevice.AttestationOptions(); o.omitReceipt = true; return o }())] {
            let rig = try Rig()
            let attested = try await rig.attest(options: options)
            #expect(attested.status == 200, "\(name): \(attested.rule)")
            #expect(try await rig.stored().receipt.isEmpty, "\(name)")
            #expect(try await rig.assert().status == 200, "\(name): the key asserts like any other")
        }
    }

    @Test func aReceiptWithAMetricIsKeptAndMinted() async throws {
        let rig = try Rig()
        var options = SimulatedAppAttestDevice.AttestationOptions()
        options.receiptFields = { $0.riskMetric = 3 }
        let attested = try await rig.attest(options: options)
        #expect(attested.status == 200)
        #expect(try await rig.stored().riskMetric == 3)
        #expect(try Self.risk(attested, path: ["appCheckToken", "token"]) == .some(3))
        let asserted = try await rig.assert()
        #expect(asserted.status == 200)
        #expect(try Self.risk(asserted) == .some(3), "not enforced (max_risk_metric 0), still carried")
    }

    @Test func maxRiskMetricRefusesKeysAboveIt() async throws {
        let rig = try Rig { $0.maxRiskMetric = 2 }
        #expect(try await rig.attest().status == 200)
        var outcome = try await rig.assert()
        #expect(outcome.status == 200, "an unknown metric passes unless required")
        #expect(try Self.risk(outcome) == .none)
        try await rig.setMetric(2)
        outcome = try await rig.assert()
        #expect(outcome.status == 200)
        #expect(try Self.risk(outcome) == .some(2))
        try await rig.setMetric(3)
        outcome = try await rig.assert()
        #expect((outcome.status, outcome.rule, outcome.result) == (403, "risk_metric_exceeded", "permission_denied"))

        let strict = try Rig { $0.maxRiskMetric = 2; $0.requireRiskMetric = true }
        #expect(try await strict.attest().status == 200)
        outcome = try await strict.assert()
        #expect((outcome.status, outcome.rule) == (403, "risk_metric_unknown"))
        try await strict.setMetric(1)
        #expect(try await strict.assert().status == 200)
    }
}
