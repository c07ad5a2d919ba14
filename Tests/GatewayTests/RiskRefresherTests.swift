import AppAttest
import AppAttestSimulator
import AppCheck
import Foundation
import ReplayStores
import Testing
import TestSupport
@testable import Gateway
@testable import GatewayProcess
@testable import ProxyCore
@testable import GatewayConfig
@testable import Issuer

/// The receipt refresher (docs/issuer.md "Fraud risk") against a fake Apple data API that checks the ES256 bearer
/// token with the test `.p8` key's public half and answers receipts signed by the test receipt CA: 200 stores the
/// new metric (which `max_risk_metric` then enforces), 304 waits, 404 keeps the last, 429/5xx back off, a foreign
/// receipt is refused; each key at most once per `refresh`.
@Suite struct RiskRefresherTests {
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
    static let keyId = "ABC123DEFG"

    final class Rig: @unchecked Sendable {
        let phone: SimulatedIPhone
        let apple: FakeAppAttestDataServer
        let service: IssuerService
        let state: MemoryIssuerState
        let dir: URL

        init(appleKnowsOurKey: Bool = true, maxRiskMetric: Int = 2) throws {
            phone = try SimulatedIPhone()
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("risk-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let p8 = try ES256PrivateKey.generate()
            let p8Path = dir.appendingPathComponent("AuthKey.p8").path
            try p8.pemRepresentation().write(toFile: p8Path, atomically: true, encoding: .utf8)
            apple = try FakeAppAttestDataServer(publicKey: appleKnowsOurKey ? p8.publicKey : ES256PrivateKey.generate().publicKey,
                                                keyId: RiskRefresherTests.keyId, teamId: "ABCDE12345", receiptCA: phone.receiptCA)
            var settings = IssuerSettings()
            settings.issuerURL = "https://api.example.com/appcheck"
            var app = IssuerAppSettings(appId: RiskRefresherTests.appId)
            app.teamId = "ABCDE12345"
            app.bundleId = "com.example.app"
            var attest = AppAttestAppSettings()
            attest.rootCAFile = phone.rootCAPath
            attest.receiptRootCAFile = phone.receiptRootCAPath
            attest.risk.apiURL = apple.url
            app.appAttest = attest
            app.deviceCheck = DeviceCheckAppSettings(keyId: RiskRefresherTests.keyId, privateKeyPath: p8Path)
            app.maxRiskMetric = maxRiskMetric
            settings.apps = [app]
            state = MemoryIssuerState()
            service = try IssuerService(settings: settings, projectNumber: "123456789012", projectId: nil,
                                        keys: try IssuerKeys([(kid: "k1", key: try RSAPrivateKey.generate())]), state: state)
        }
        deinit {
            service.stop()
            apple.stop()
            phone.cleanUp()
            try? FileManager.default.removeItem(at: dir)
        }

        var refresher: RiskRefresher { service.riskRefresher! }

        func call(_ method: String, _ body: String) async -> IssuerOutcome {
            let path = IssuerPath.match("/appcheck/v1/projects/123456789012/apps/\(RiskRefresherTests.appId):\(method)"[...],
                                        basePath: "/appcheck")!
            return await service.handle(path, httpMethod: "POST", body: Array(body.utf8))
        }

        func challenge() async throws -> [UInt8] {
            let outcome = await call("generateAppAttestChallenge", "")
            return try #require(IssuerJSON.decodeBase64(try StrictJSON.parse(outcome.body).member("challenge")?.stringValue ?? ""))
        }

        func attest() async throws {
            let c = try await challenge()
            let body = #"{"key_id":"\#(phone.keyIdBase64)","attestation":"\#(try phone.attestationBase64(challenge: c))","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#
            let outcome = await call("exchangeAppAttestAttestation", body)
            #expect(outcome.status == 200, "\(outcome.rule)")
        }

        func assert() async throws -> IssuerOutcome {
            let artifact = phone.device.keyId
            let c = try await challenge()
            let assertion = try phone.assertionBase64(artifact: artifact, challenge: c)
            return await call("exchangeAppAttestAssertion",
                              #"{"artifact":"\#(IssuerJSON.encodeBase64(artifact))","assertion":"\#(assertion)","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#)
        }

        func stored() async throws -> AttestedKey { try #require(try await state.key(phone.device.keyId, appId: RiskRefresherTests.appId)) }

        /// Makes the key due again (a day passing, without moving the clock Apple's bearer check uses).
        func makeDue() async throws {
            #expect(try await state.scheduleRefresh(phone.device.keyId, appId: RiskRefresherTests.appId, at: 0))
        }
    }

    static func summary(refreshed: Int = 0, notYet: Int = 0, noData: Int = 0, backedOff: Int = 0, refused: Int = 0,
                        skipped: Int = 0) -> RiskRefresher.Summary {
        var s = RiskRefresher.Summary()
        (s.refreshed, s.notYet, s.noData, s.backedOff, s.refused, s.skipped) = (refreshed, notYet, noData, backedOff, refused, skipped)
        return s
    }

    @Test func refreshStoresTheMetricAndEachAnswerIsHandled() async throws {
        let rig = try Rig()
        try await rig.attest()
        let attested = try await rig.stored()
        let now = Date().timeIntervalSince1970
        #expect(attested.riskMetric == nil)
        #expect(try #require(attested.receiptRefreshAt) <= now, "the first refresh is due at once")

        rig.apple.queue([.receipt(riskMetric: 1)])
        let refreshStarted = Date().timeIntervalSince1970
        #expect(await rig.refresher.runOnce() == Self.summary(refreshed: 1))
        let refreshEnded = Date().timeIntervalSince1970
        var key = try await rig.stored()
        #expect(key.riskMetric == 1)
        // A day after the refresh, whenever during the call it was stamped (no bound on how long the call took).
        let next = try #require(key.receiptRefreshAt)
        #expect(next >= refreshStarted + 86_400 - 1 && next <= refreshEnded + 86_400 + 1, "next refresh a day later")
        let verifier = try AppAttestReceiptVerifier(rootCertificatePEM: rig.phone.receiptCA.rootPEM)
        #expect(try verifier.verifySignature(key.receipt, at: Int64(now)).kind == .receipt, "the new receipt is kept")
        #expect(await rig.refresher.runOnce() == Self.summary(), "at most once a day per key")
        #expect(rig.apple.calls == 1)
        var asserted = try await rig.assert()
        #expect(asserted.status == 200)

        try await rig.makeDue()
        rig.apple.queue([.receipt(riskMetric: 3)])
        #expect(await rig.refresher.runOnce() == Self.summary(refreshed: 1))
        #expect(try await rig.stored().riskMetric == 3)
        asserted = try await rig.assert()
        #expect((asserted.status, asserted.rule) == (403, "risk_metric_exceeded"))

        try await rig.makeDue()
        rig.apple.queue([.notModified])
        #expect(await rig.refresher.runOnce() == Self.summary(notYet: 1))
        key = try await rig.stored()
        #expect(key.riskMetric == 3)
        #expect(try #require(key.receiptRefreshAt) >= max(now + 86_400, key.receiptNotBefore ?? 0), "after its not-before")

        try await rig.makeDue()
        rig.apple.queue([.foreignReceipt])
        #expect(await rig.refresher.runOnce() == Self.summary(refused: 1))
        #expect(try await rig.stored().riskMetric == 3, "a receipt for another app is not stored")
        #expect(try await rig.stored().receipt == key.receipt)

        try await rig.makeDue()
        rig.apple.queue([.notFound])
        #expect(await rig.refresher.runOnce() == Self.summary(noData: 1))
        key = try await rig.stored()
        #expect(key.riskMetric == 3 && !key.receipt.isEmpty, "Apple's 404 keeps the last receipt and metric")
        #expect(key.receiptRefreshAt == nil, "and the key is not asked about again")
        #expect(rig.apple.calls == 5)
        var text = MetricsText()
        rig.refresher.render(&text)
        for (result, n) in [("refreshed", 2), ("not_yet", 1), ("no_data", 1), ("backed_off", 0), ("refused", 1)] {
            #expect(text.text.contains("appcheck_issuer_receipt_refresh_total{app_id=\"\(Self.appId)\",result=\"\(result)\"} \(n)\n"),
                    "\(text.text)")
        }
    }

    /// `appcheck_issuer_risk_metric` observes each refreshed receipt's metric, `appcheck_issuer_risk_refusals_total`
    /// counts assertions refused for risk, and the dashboard's keys per bucket follow the key's latest metric.
    @Test func riskHistogramRefusalsAndKeysPerBucket() async throws {
        let rig = try Rig()
        let metrics = rig.service.riskMetrics
        func scrape() -> String { var t = MetricsText(); metrics.render(&t); return t.text }
        func keys(_ window: String) throws -> [String: Int] {
            let apps = try #require(metrics.dashboard(at: Date().timeIntervalSince1970)["apps"] as? [[String: Any]])
            return try #require((apps.first?["keys"] as? [String: Any])?[window] as? [String: Int])
        }
        let zero = Dictionary(uniqueKeysWithValues: RiskMetrics.bucketNames.map { ($0, 0) })
        #expect(try keys("week") == zero)
        #expect(scrape().contains("appcheck_issuer_risk_metric_count{app_id=\"\(Self.appId)\"} 0\n"))

        try await rig.attest()
        var expected = zero
        expected["unknown"] = 1
        #expect(try keys("hour") == expected, "a new key's metric is unknown")

        rig.apple.queue([.receipt(riskMetric: 1)])
        #expect(await rig.refresher.runOnce() == Self.summary(refreshed: 1))
        #expect(try await rig.assert().status == 200)
        try await rig.makeDue()
        rig.apple.queue([.receipt(riskMetric: 7)])
        #expect(await rig.refresher.runOnce() == Self.summary(refreshed: 1))
        let refused = try await rig.assert()
        #expect((refused.status, refused.rule) == (403, "risk_metric_exceeded"))

        expected = zero
        expected["10"] = 1
        for window in ["hour", "day", "week"] { #expect(try keys(window) == expected, "\(window): one key, metric 7 (le 10)") }
        let text = scrape()
        let app = #"app_id="\#(Self.appId)""#
        for line in [#"appcheck_issuer_risk_metric_bucket{\#(app),le="1"} 1"#, #"appcheck_issuer_risk_metric_bucket{\#(app),le="5"} 1"#,
                     #"appcheck_issuer_risk_metric_bucket{\#(app),le="10"} 2"#, #"appcheck_issuer_risk_metric_bucket{\#(app),le="+Inf"} 2"#,
                     #"appcheck_issuer_risk_metric_sum{\#(app)} 8"#, #"appcheck_issuer_risk_metric_count{\#(app)} 2"#,
                     #"appcheck_issuer_risk_refusals_total{\#(app),rule="risk_metric_exceeded"} 1"#,
                     #"appcheck_issuer_risk_refusals_total{\#(app),rule="risk_metric_unknown"} 0"#] {
            #expect(text.contains(line + "\n"), "missing \(line) in \(text)")
        }
        #expect(text.contains("# TYPE appcheck_issuer_risk_metric histogram\n"))
        let apps = try #require(metrics.dashboard(at: Date().timeIntervalSince1970)["apps"] as? [[String: Any]])
        let refusals = try #require(apps.first?["refusals"] as? [String: [String: Int]])
        #expect(refusals["risk_metric_exceeded"] == ["hour": 1, "day": 1, "week": 1, "total": 1])
        #expect(refusals["risk_metric_unknown"] == ["hour": 0, "day": 0, "week": 0, "total": 0])
    }

    /// The dashboard's key table stays bounded: past `maxKeys`, keys seen this week are kept and new ones counted
    /// as untracked; a key not seen for a week is forgotten to make room.
    @Test func keysPerBucketAreBounded() throws {
        let metrics = RiskMetrics(apps: [Self.appId])
        let start = 1_800_000_000.0
        func keyId(_ n: Int) -> [UInt8] { withUnsafeBytes(of: UInt64(n).bigEndian) { Array($0) } + [UInt8](repeating: 0, count: 24) }
        for n in 0..<RiskMetrics.maxKeys { metrics.sawKey(keyId(n), appId: Self.appId, metric: 1, now: start) }
        metrics.sawKey(keyId(RiskMetrics.maxKeys), appId: Self.appId, metric: 30, now: start + 60)
        var block = metrics.dashboard(at: start + 60)
        #expect(block["tracked_keys"] as? Int == RiskMetrics.maxKeys && block["untracked_keys"] as? Int == 1)
        metrics.sawKey(keyId(0), appId: Self.appId, metric: 2, now: start + 60)
        #expect(metrics.dashboard(at: start + 60)["tracked_keys"] as? Int == RiskMetrics.maxKeys, "a tracked key moves bucket")
        // A week later the old keys are forgotten when a new one needs the room.
        let later = start + 7 * 86_400 + 120
        metrics.sawKey(keyId(RiskMetrics.maxKeys + 1), appId: Self.appId, metric: 30, now: later)
        block = metrics.dashboard(at: later)
        #expect(block["tracked_keys"] as? Int == 1 && block["untracked_keys"] as? Int == 1)
        let apps = try #require(block["apps"] as? [[String: Any]])
        #expect(((apps.first?["keys"] as? [String: Any])?["hour"] as? [String: Int])?["50"] == 1)
        metrics.sawKey(keyId(1), appId: "1:123456789012:ios:ffff", metric: 1, now: later)
        #expect(metrics.dashboard(at: later)["tracked_keys"] as? Int == 1, "an app that is not configured is not tracked")
    }

    @Test func overloadAndServerErrorsBackOff() async throws {
        for answer in [FakeAppAttestDataServer.Answer.tooManyRequests, .serverError] {
            let rig = try Rig()
            try await rig.attest()
            rig.apple.queue([answer, .receipt(riskMetric: 1)])
            // Read before the pass: the pause is measured from the answer, and under load the checks below may run
            // many seconds after it.
            let before = Date().timeIntervalSince1970
            #expect(await rig.refresher.runOnce() == Self.summary(backedOff: 1))
            #expect(try await rig.stored().riskMetric == nil)
            #expect(try await rig.stored().receiptRefreshAt.map { $0 <= Date().timeIntervalSince1970 } == true, "still due")
            let paused = try #require(rig.refresher.pausedUntil(Self.appId))
            #expect(paused > before + 50)
            #expect(await rig.refresher.runOnce() == Self.summary(skipped: 1), "no call while paused")
            #expect(rig.apple.calls == 1)
        }
    }

    /// The bearer token is reused for 20 minutes (`DeviceCheckClient.bearerLifetime`), so Apple sees an `iat` up to
    /// that old on a later call, and takes it (Apple refuses provider tokens older than an hour). A fake that took
    /// only 60 s made a loaded run's second refresh answer 401 for the token's whole lifetime.
    @Test func aBearerTokenReusedWithinItsLifetimeIsTaken() async throws {
        let rig = try Rig()
        try await rig.attest()
        rig.apple.queue([], fallback: .receipt(riskMetric: 1))
        let key = try await rig.stored()
        let environment = try #require(AppAttestEnvironment(rawValue: key.environment))
        var risk = ReceiptRefreshSettings()
        risk.apiURL = rig.apple.url
        let client = try ReceiptExchangeClient(
            deviceCheck: DeviceCheckAppSettings(keyId: Self.keyId, privateKeyPath: rig.dir.appendingPathComponent("AuthKey.p8").path),
            teamId: "ABCDE12345", risk: risk)
        let now = Date().timeIntervalSince1970
        // The first call mints the token 1,000 s in the past; the second, at now, reuses it.
        for at in [now - 1000, now] {
            let answer = await client.exchange(key.receipt, environment: environment, now: at)
            guard case .receipt = answer else { Issue.record("at now\(Int(at - now)) s: \(answer)"); continue }
        }
        #expect(rig.apple.calls == 2)
    }

    @Test func aRevokedKeyIsRefusedByAppleAndBacksOff() async throws {
        let rig = try Rig(appleKnowsOurKey: false)
        try await rig.attest()
        #expect(await rig.refresher.runOnce() == Self.summary(backedOff: 1))
        #expect(rig.apple.calls == 1)
        #expect(try await rig.stored().riskMetric == nil)
    }

    @Test func theBackgroundLoopRefreshesAfterStart() async throws {
        let rig = try Rig()
        try await rig.attest()
        rig.apple.queue([], fallback: .receipt(riskMetric: 2))
        rig.service.start()
        let deadline = Date().addingTimeInterval(15)
        while try await rig.stored().riskMetric == nil, Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        #expect(try await rig.stored().riskMetric == 2)
        rig.service.stop()
        #expect(rig.apple.calls == 1)
    }

    @Test func atMostFourCallsAtOnce() async throws {
        let rig = try Rig()
        let now = Int64(Date().timeIntervalSince1970)
        for _ in 0..<10 {
            let device = try SimulatedAppAttestDevice(ca: rig.phone.ca, appId: rig.phone.device.appId, receiptCA: rig.phone.receiptCA)
            let c = try await rig.challenge()
            let object = try device.attest(clientDataHash: AppAttestVerifier.clientDataHash(challenge: c), now: now)
            let body = #"{"key_id":"\#(Data(device.keyId).base64EncodedString())","attestation":"\#(Data(object).base64EncodedString())","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#
            #expect(await rig.call("exchangeAppAttestAttestation", body).status == 200)
        }
        rig.apple.setDelay(0.2)
        rig.apple.queue([], fallback: .receipt(riskMetric: 1))
        #expect(await rig.refresher.runOnce() == Self.summary(refreshed: 10))
        #expect(rig.apple.calls == 10)
        #expect(rig.apple.mostInFlight > 1 && rig.apple.mostInFlight <= rig.refresher.maxConcurrent,
                "\(rig.apple.mostInFlight) at once")
        #expect(rig.refresher.maxConcurrent == 4)
    }

    @Test func noDeviceCheckKeyMeansNoRefresher() throws {
        let phone = try SimulatedIPhone()
        defer { phone.cleanUp() }
        var settings = IssuerSettings()
        settings.issuerURL = "https://api.example.com/appcheck"
        var app = IssuerAppSettings(appId: Self.appId)
        app.teamId = "ABCDE12345"
        app.bundleId = "com.example.app"
        app.appAttest = AppAttestAppSettings()
        settings.apps = [app]
        let service = try IssuerService(settings: settings, projectNumber: "123456789012", projectId: nil,
                                        keys: try IssuerKeys([(kid: "k1", key: try RSAPrivateKey.generate())]), state: MemoryIssuerState())
        #expect(service.riskRefresher == nil)
    }
}
