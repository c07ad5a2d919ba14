import AppAttest
import AppCheck
import Foundation
import ReplayStores
import Testing
import TestSupport
@testable import Gateway
@testable import GatewayProcess
@testable import Issuer

/// Fraud risk end to end over real sockets (docs/issuer.md "Fraud risk"): a gateway whose issuer refreshes receipts
/// with a fake Apple data server, a simulated iPhone attesting and asserting, routes with `max_risk` (enforce,
/// monitor, `require_risk`), and what `/metrics`, `/dashboard.json` and the dashboard page show.
@Suite(.serialized) struct RiskEndToEndTests {
    static let appId = IssuerEndToEndTests.appId
    static let base = IssuerEndToEndTests.base

    final class Rig: @unchecked Sendable {
        let phone: SimulatedIPhone
        let apple: FakeAppAttestDataServer
        let gateway: GatewayHarness
        let dir: URL

        init() throws {
            phone = try SimulatedIPhone()
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("risk-e2e-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let p8 = try ES256PrivateKey.generate()
            let p8Path = dir.appendingPathComponent("AuthKey.p8").path
            try p8.pemRepresentation().write(toFile: p8Path, atomically: true, encoding: .utf8)
            let keyPath = dir.appendingPathComponent("sign.pem").path
            try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: keyPath, atomically: true, encoding: .utf8)
            apple = try FakeAppAttestDataServer(publicKey: p8.publicKey, keyId: "ABC123DEFG", teamId: "ABCDE12345",
                                                receiptCA: phone.receiptCA)
            let (phone, apple, statePath) = (phone, apple, dir.appendingPathComponent("issuer.sqlite").path)
            gateway = try GatewayHarness { upstream in
                GatewayHarness.config(upstream: upstream, routes: """
                  - name: low-risk
                    prefix: /low/
                    upstream: api
                    enforcement: enforce
                    max_risk: 2
                  - name: low-risk-monitor
                    prefix: /watch/
                    upstream: api
                    enforcement: monitor
                    max_risk: 2
                  - name: known-risk
                    prefix: /known/
                    upstream: api
                    enforcement: enforce
                    max_risk: 10
                    require_risk: true
                  - name: open
                    prefix: /
                    upstream: api
                    enforcement: off
                """, appCheck: """
                  jwks: { url: none }
                """, top: """
                issuer:
                  base_path: /appcheck
                  issuer_url: https://api.example.com/appcheck
                  signing_keys: [\(keyPath)]
                  state: { store: sqlite, sqlite_path: \(statePath) }
                  apps:
                    - app_id: "\(RiskEndToEndTests.appId)"
                      team_id: ABCDE12345
                      bundle_id: com.example.app
                      app_attest:
                        environments: [production]
                        root_ca_file: \(phone.rootCAPath)
                        receipt_root_ca_file: \(phone.receiptRootCAPath)
                        risk: { refresh: 24h, api_url: "\(apple.url)" }
                      device_check: { key_id: ABC123DEFG, private_key: \(p8Path), api_url: "http://127.0.0.1:9" }
                      max_risk_metric: 5
                """)
            }
        }

        func stop() {
            gateway.stop()
            apple.stop()
            phone.cleanUp()
            try? FileManager.default.removeItem(at: dir)
        }

        func post(_ method: String, _ body: String) throws -> TestResponse {
            try RawHTTPClient.roundTrip(port: gateway.port, "POST \(RiskEndToEndTests.base):\(method) HTTP/1.1\r\nHost: gw\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: application/json\r\n\r\n\(body)",
                                        method: "POST", timeout: 60)
        }

        func challenge() throws -> [UInt8] {
            let r = try post("generateAppAttestChallenge", "")
            return try #require((try StrictJSON.parse(r.body).member("challenge")?.stringValue).flatMap { $0.flatMap(IssuerJSON.decodeBase64) })
        }

        /// Attests the phone's key; the session token.
        func attest() throws -> String {
            let c = try challenge()
            let r = try post("exchangeAppAttestAttestation",
                             #"{"key_id":"\#(phone.keyIdBase64)","attestation":"\#(try phone.attestationBase64(challenge: c))","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#)
            #expect(r.status == 200, "\(r.bodyText)")
            return try IssuerEndToEndTests.token(r, path: ["appCheckToken", "token"])
        }

        func assert() throws -> TestResponse {
            let c = try challenge()
            let artifact = phone.device.keyId
            return try post("exchangeAppAttestAssertion",
                            #"{"artifact":"\#(IssuerJSON.encodeBase64(artifact))","assertion":"\#(try phone.assertionBase64(artifact: artifact, challenge: c))","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#)
        }

        func call(_ path: String, token: String) throws -> TestResponse {
            try RawHTTPClient.roundTrip(port: gateway.port, "GET \(path) HTTP/1.1\r\nHost: gw\r\nX-Firebase-AppCheck: \(token)\r\n\r\n",
                                        method: "GET", timeout: 60)
        }

        func admin(_ path: String) throws -> TestResponse {
            try RawHTTPClient.roundTrip(port: gateway.adminPort, "GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n")
        }

        /// One pass of the gateway's own refresher, then until the key's stored metric is `metric`: the background
        /// loop may hold the key's claim (the per-key claim makes the two ask Apple once between them), and then
        /// `runOnce` returns before that loop has stored what Apple said. Under a whole suite's load an answer can
        /// outlast the refresher's 10 s timeout, which pauses the app's calls (a minute, doubling); so while waiting,
        /// every 2 s the key is made due again and a pass is run: the first after a pause refreshes it. (A clean-clone
        /// run once kept the old metric for 150 s: the fake Apple took a bearer `iat` only 60 s old, and the refresher
        /// rightly reuses its token for 20 minutes; `RiskRefresherTests.aBearerTokenReusedWithinItsLifetimeIsTaken`.) This test is about what the
        /// routes, metrics and dashboard do with a stored metric; when a key falls due and how pauses work is
        /// `RiskRefresherTests`' and `RiskRefreshClaimTests`' to show. Waits at most 400 s (a bound, not a speed).
        func refresh(expecting metric: Int) async throws {
            let refresher = try #require(gateway.server.issuer?.riskRefresher)
            let state = try #require(gateway.server.issuer?.state as? IssuerReceiptState)
            _ = await refresher.runOnce()
            let deadline = ContinuousClock.now + .seconds(400)
            var nextPass = ContinuousClock.now + .seconds(2)
            var stored = try await state.key(phone.device.keyId, appId: RiskEndToEndTests.appId)?.riskMetric
            while stored != metric, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
                if ContinuousClock.now >= nextPass {
                    _ = try await state.scheduleRefresh(phone.device.keyId, appId: RiskEndToEndTests.appId, at: 0)
                    _ = await refresher.runOnce()
                    nextPass = ContinuousClock.now + .seconds(2)
                }
                stored = try await state.key(phone.device.keyId, appId: RiskEndToEndTests.appId)?.riskMetric
            }
            #expect(stored == metric, "the refresh stored \(String(describing: stored))")
        }

        /// Makes the phone's key due again (a day passing).
        func makeDue() async throws {
            let state = try #require(gateway.server.issuer?.state as? IssuerReceiptState)
            #expect(try await state.scheduleRefresh(phone.device.keyId, appId: RiskEndToEndTests.appId, at: 0))
        }
    }

    static func risk(_ token: String) throws -> Int? {
        let payload = try #require(Base64URL.decode(Array(token.split(separator: ".")[1].utf8)))
        return try StrictJSON.parse(payload).member("risk")?.numberValue.map { Int($0) }
    }

    @Test func routesRefuseTokensAboveMaxRiskAndMetricsAndDashboardShowTheMetric() async throws {
        let rig = try Rig()
        defer { rig.stop() }

        // A new key: its metric is unknown, so its token has no `risk`.
        let session = try rig.attest()
        #expect(try Self.risk(session) == nil)
        #expect(try rig.call("/low/x", token: session).status == 200, "unknown risk passes max_risk")
        let unknown = try rig.call("/known/x", token: session)
        #expect(try unknown.status == 401 && IssuerEndToEndTests.reason(unknown) == "risk_unknown", "\(unknown.bodyText)")

        // Apple answers metric 3: above the route's 2, under the app's 5.
        // Apple's answer is also the fallback: under the whole suite's load an answer can take longer than the
        // refresher's 10 s timeout, and its retry must hear the same. So the calls are counted as at least one here;
        // that the per-key claim makes the gateway's two refreshers ask once is RiskRefreshClaimTests' to show.
        rig.apple.queue([.receipt(riskMetric: 3)], fallback: .receipt(riskMetric: 3))
        try await rig.refresh(expecting: 3)
        #expect(rig.apple.calls >= 1)
        let callsBefore = rig.apple.calls
        let three = try IssuerEndToEndTests.token(try rig.assert())
        #expect(try Self.risk(three) == 3)
        let refused = try rig.call("/low/x", token: three)
        #expect(refused.status == 401, "\(refused.bodyText)")
        #expect(try IssuerEndToEndTests.reason(refused) == "risk_exceeded")
        #expect(refused.bodyText.contains(#""error":"app_check_token_invalid""#), "\(refused.bodyText)")
        let watched = try rig.call("/watch/x", token: three)
        #expect(watched.status == 200, "monitor forwards")
        let head = try #require(rig.gateway.upstream.receivedHeads.last)
        #expect(head.contains("X-AppCheck-Status: invalid") && head.contains("X-AppCheck-Reason: risk_exceeded"), "\(head)")
        #expect(try rig.call("/known/x", token: three).status == 200)

        // Apple answers metric 30: above the app's max_risk_metric, so assertions are refused.
        // Queued before the key is due: the background refresher may take it first, and must find this answer.
        rig.apple.queue([.receipt(riskMetric: 30)], fallback: .receipt(riskMetric: 30))
        try await rig.makeDue()
        try await rig.refresh(expecting: 30)
        #expect(rig.apple.calls > callsBefore)
        let denied = try rig.assert()
        #expect(denied.status == 403 && denied.bodyText.contains("PERMISSION_DENIED"), "\(denied.bodyText)")

        let metrics = try rig.admin("/metrics").bodyText
        let app = #"app_id="\#(Self.appId)""#
        for line in [#"appcheck_issuer_risk_metric_bucket{\#(app),le="2"} 0"#, #"appcheck_issuer_risk_metric_bucket{\#(app),le="5"} 1"#,
                     #"appcheck_issuer_risk_metric_bucket{\#(app),le="50"} 2"#, #"appcheck_issuer_risk_metric_sum{\#(app)} 33"#,
                     #"appcheck_issuer_risk_metric_count{\#(app)} 2"#,
                     #"appcheck_issuer_risk_refusals_total{\#(app),rule="risk_metric_exceeded"} 1"#,
                     #"appcheck_rejections_total{route="low-risk",mode="enforce",reason="risk_exceeded"} 1"#,
                     #"appcheck_rejections_total{route="low-risk-monitor",mode="monitor",reason="risk_exceeded"} 1"#,
                     #"appcheck_rejections_total{route="known-risk",mode="enforce",reason="risk_unknown"} 1"#] {
            #expect(metrics.contains(line + "\n"), "missing \(line)")
        }

        let json = try #require(try JSONSerialization.jsonObject(with: Data(rig.admin("/dashboard.json").body)) as? [String: Any])
        let risk = try #require((json["issuer"] as? [String: Any])?["risk"] as? [String: Any])
        let entry = try #require((risk["apps"] as? [[String: Any]])?.first)
        #expect(entry["app_id"] as? String == Self.appId)
        let hour = try #require((entry["keys"] as? [String: Any])?["hour"] as? [String: Int])
        #expect(hour["50"] == 1 && hour.values.reduce(0, +) == 1, "one key, metric 30: \(hour)")
        let refusals = try #require(entry["refusals"] as? [String: [String: Int]])
        #expect(refusals["risk_metric_exceeded"]?["hour"] == 1)

        // The page shows the key in its bucket and the refusal, in red.
        let profile = NSTemporaryDirectory() + "dashboard-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let dump = try BoundedCommand.run(DashboardBrowserTests.chromium, DashboardBrowserTests.flags(profile: profile) + [
            "--virtual-time-budget=3000", "--dump-dom", "http://127.0.0.1:\(rig.gateway.adminPort)/dashboard#hour"], timeout: 90)
        #expect(dump.status == 0, "\(dump.stderr)")
        let block = try #require(DashboardBrowserTests.slice(dump.stdout, from: #"<div id="issuer-risk">"#, to: "</div>"),
                                 "no fraud-risk block")
        #expect(block.contains(#"<span class="app-id">\#(Self.appId)</span>: 1 key seen"#), "\(block)")
        #expect(block.contains(#"data-bucket="50""#) && block.contains("≤50 1</span>"), "\(block)")
        #expect(block.contains("≤1 0</span>") && block.contains("unknown 0</span>"), "\(block)")
        #expect(block.contains(#"<span class="risk-refused bad"> · refused for risk 1</span>"#), "\(block)")
    }
}
