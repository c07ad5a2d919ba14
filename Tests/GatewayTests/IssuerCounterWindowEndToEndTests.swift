import AppAttestSimulator
import AppCheck
import Foundation
@testable import Gateway
@testable import Issuer
import Synchronization
import TestSupport
import Testing

/// Issue 23 #2 and #10 end to end: AppCheckCore signs concurrent assertions whose counters may arrive out of order,
/// so the issuer accepts any counter not accepted before within 64 below the highest — through two gateways sharing
/// one real `redis-server` — and bounds outstanding challenges per client address over real sockets.
@Suite(.serialized) struct IssuerCounterWindowEndToEndTests {
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
    static let base = "/appcheck/v1/projects/123456789012/apps/\(appId)"

    /// Gateways with an App Attest issuer on one state store.
    final class Pair: @unchecked Sendable {
        let phone: SimulatedIPhone
        let dir: URL
        let gateways: [GatewayHarness]

        init(count: Int, state: String, maxChallengesPerAddress: Int = 1000) throws {
            phone = try SimulatedIPhone()
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-window-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let keyPath = dir.appendingPathComponent("sign.pem").path
            try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: keyPath, atomically: true, encoding: .utf8)
            let rootCA = phone.rootCAPath
            gateways = try (0..<count).map { _ in
                try GatewayHarness { upstream in
                    GatewayHarness.config(upstream: upstream, routes: """
                      - name: open
                        prefix: /
                        upstream: api
                        enforcement: off
                    """, appCheck: """
                      jwks: { url: "http://127.0.0.1:9/jwks" }
                    """, top: """
                    issuer:
                      issuer_url: https://api.example.com/appcheck
                      signing_keys: [\(keyPath)]
                      state: \(state)
                      max_exchanges_per_second: 100000
                      max_exchanges_per_address: 0
                      max_challenges_per_address: \(maxChallengesPerAddress)
                      apps:
                        - app_id: "\(IssuerCounterWindowEndToEndTests.appId)"
                          team_id: ABCDE12345
                          bundle_id: com.example.app
                          app_attest:
                            environments: [production]
                            root_ca_file: \(rootCA)
                    """)
                }
            }
        }

        func stop() {
            for g in gateways { g.stop() }
            phone.cleanUp()
            try? FileManager.default.removeItem(at: dir)
        }

        func post(_ gateway: Int, _ method: String, _ body: String, source: String = "127.0.0.1") throws -> TestResponse {
            try RawHTTPClient.roundTrip(port: gateways[gateway].port,
                                        "POST \(IssuerCounterWindowEndToEndTests.base):\(method) HTTP/1.1\r\nHost: gw\r\n"
                                        + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)",
                                        method: "POST", timeout: 30, source: source)
        }

        func challenge(_ gateway: Int, source: String = "127.0.0.1") throws -> [UInt8]? {
            let r = try post(gateway, "generateAppAttestChallenge", "", source: source)
            guard r.status == 200, let text = try StrictJSON.parse(r.body).member("challenge")?.stringValue else { return nil }
            return IssuerJSON.decodeBase64(text)
        }

        func attest() throws -> [UInt8] {
            let c = try #require(try challenge(0))
            let r = try post(0, "exchangeAppAttestAttestation",
                             #"{"keyId":"\#(phone.keyIdBase64)","attestation":"\#(try phone.attestationBase64(challenge: c))","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#)
            #expect(r.status == 200, "\(r.bodyText)")
            let text = try #require(try StrictJSON.parse(r.body).member("artifact")?.stringValue)
            return try #require(IssuerJSON.decodeBase64(text))
        }

        /// One assertion with `counter` through gateway `gateway`; the status.
        func assert(_ artifact: [UInt8], counter: UInt32, via gateway: Int) throws -> Int {
            let c = try #require(try challenge(gateway))
            var options = SimulatedAppAttestDevice.AssertionOptions()
            options.counter = counter
            let assertion = try phone.assertionBase64(artifact: artifact, challenge: c, options: options)
            return try post(gateway, "exchangeAppAttestAssertion",
                            #"{"artifact":"\#(IssuerJSON.encodeBase64(artifact))","assertion":"\#(assertion)","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#).status
        }

        /// True once a gateway logged `rule`.
        func logged(_ rule: String) -> Bool {
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline {
                if gateways.contains(where: { $0.logged(#""rule":"\#(rule)""#, timeout: 0) }) { return true }
                usleep(20_000)
            }
            return false
        }
    }

    @Test func countersArriveOutOfOrderThroughTwoGatewaysOnOneRedis() throws {
        let redis = try RedisServerProcess()
        let pair = try Pair(count: 2, state: "{ store: redis, redis_url: \"\(redis.url)\" }")
        defer { pair.stop() }
        let artifact = try pair.attest()

        // AppCheckCore's two concurrent limitedUseToken() calls: counters 5 then 4, both accepted; 4 again refused.
        #expect(try pair.assert(artifact, counter: 5, via: 0) == 200)
        #expect(try pair.assert(artifact, counter: 4, via: 1) == 200, "a lower counter never accepted before")
        #expect(try pair.assert(artifact, counter: 4, via: 0) == 403)
        #expect(pair.logged("counter_repeated"))

        // 32 concurrent assertions with distinct counters, spread over both gateways: each accepted once.
        let counters = Array(UInt32(6)...UInt32(37)).shuffled()
        let accepted = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: counters.count) { i in
            switch Result(catching: { try pair.assert(artifact, counter: counters[i], via: i % 2) }) {
            case .success(let status): if status == 200 { accepted.add(1, ordering: .relaxed) }
            case .failure: failed.add(1, ordering: .relaxed)
            }
        }
        #expect(failed.load(ordering: .relaxed) == 0, "requests that failed are not refusals")
        #expect(accepted.load(ordering: .relaxed) == 32)
        // The same 32 again, concurrently, through the other gateway: none passes twice.
        let repeated = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: counters.count) { i in
            switch Result(catching: { try pair.assert(artifact, counter: counters[i], via: (i + 1) % 2) }) {
            case .success(let status): if status == 200 { repeated.add(1, ordering: .relaxed) }
            case .failure: failed.add(1, ordering: .relaxed)
            }
        }
        #expect(failed.load(ordering: .relaxed) == 0, "requests that failed are not refusals")
        #expect(repeated.load(ordering: .relaxed) == 0)

        // The window: 110 becomes the highest; 45 (65 below, never used) is refused, 46 (64 below) accepted once.
        #expect(try pair.assert(artifact, counter: 110, via: 1) == 200)
        #expect(try pair.assert(artifact, counter: 45, via: 0) == 403)
        #expect(pair.logged("counter_below_window"))
        #expect(try pair.assert(artifact, counter: 46, via: 0) == 200, "64 below the highest is still in the window")
        #expect(try pair.assert(artifact, counter: 46, via: 1) == 403)
    }

    @Test func oneAddressCannotHoldEveryChallenge() throws {
        let pair = try Pair(count: 1, state: "{ store: memory }", maxChallengesPerAddress: 20)
        defer { pair.stop() }
        var held: [[UInt8]] = []
        for i in 0..<20 {
            let c = try pair.challenge(0, source: "127.0.0.1")
            #expect(c != nil, "challenge \(i)")
            if let c { held.append(c) }
        }
        let refused = try pair.post(0, "generateAppAttestChallenge", "", source: "127.0.0.1")
        #expect(refused.status == 429)
        #expect(refused.bodyText.contains(#""status":"RESOURCE_EXHAUSTED""#))
        #expect(pair.logged("challenge_address_full"))
        // Another address is served meanwhile.
        #expect(try pair.challenge(0, source: "127.0.0.2")?.count == 32)
        // Presenting one of the held challenges takes it (single use, even when the exchange then fails), which
        // gives the address its slot back.
        let spent = try pair.post(0, "exchangeAppAttestAttestation",
                                  #"{"keyId":"\#(pair.phone.keyIdBase64)","attestation":"AAAA","challenge":"\#(IssuerJSON.encodeBase64(held[0]))"}"#)
        #expect(spent.status == 400 || spent.status == 403, "\(spent.bodyText)")
        #expect(try pair.challenge(0, source: "127.0.0.1") != nil)
        #expect(try pair.post(0, "generateAppAttestChallenge", "", source: "127.0.0.1").status == 429)
    }
}
