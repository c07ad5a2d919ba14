import AppAttest
import AppAttestSimulator
import AppCheck
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import JSONLog
import ReplayStores
import Testing
import TestSupport
@testable import GatewayConfig
@testable import Issuer

/// Two gateway instances sharing issuer state (one real `redis-server`, or one SQLite file) refresh each key's
/// receipt once per period between them: each key's refresh is claimed atomically before Apple is asked
/// (docs/issuer.md "Fraud risk"). The fake Apple data server counts the calls.
@Suite(.serialized) struct RiskRefreshClaimTests {
    static let appId = RiskRefresherTests.appId
    static let keys = 12

    /// Two issuers (their own state handles on one store), one fake Apple, one test CA; `keys` keys attested.
    final class Pair: @unchecked Sendable {
        let phone: SimulatedIPhone
        let apple: FakeAppAttestDataServer
        let services: [IssuerService]
        let deviceKeys: [[UInt8]]
        let dir: URL

        /// `appleRefusesOurKey`: the fake Apple knows another DeviceCheck key (every call is 401); `log`: the issuers' log.
        init(states: [IssuerState], appleRefusesOurKey: Bool = false, log: LogSink? = nil) async throws {
            phone = try SimulatedIPhone()
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("risk-claim-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let p8 = try ES256PrivateKey.generate()
            let p8Path = dir.appendingPathComponent("AuthKey.p8").path
            try p8.pemRepresentation().write(toFile: p8Path, atomically: true, encoding: .utf8)
            apple = try FakeAppAttestDataServer(publicKey: appleRefusesOurKey ? try ES256PrivateKey.generate().publicKey : p8.publicKey,
                                                keyId: RiskRefresherTests.keyId, teamId: "ABCDE12345",
                                                receiptCA: phone.receiptCA)
            var settings = IssuerSettings()
            settings.issuerURL = "https://api.example.com/appcheck"
            var app = IssuerAppSettings(appId: RiskRefreshClaimTests.appId)
            app.teamId = "ABCDE12345"
            app.bundleId = "com.example.app"
            var attest = AppAttestAppSettings()
            attest.rootCAFile = phone.rootCAPath
            attest.receiptRootCAFile = phone.receiptRootCAPath
            attest.risk.apiURL = apple.url
            app.appAttest = attest
            app.deviceCheck = DeviceCheckAppSettings(keyId: RiskRefresherTests.keyId, privateKeyPath: p8Path)
            settings.apps = [app]
            let keys = try IssuerKeys([(kid: "k1", key: try RSAPrivateKey.generate())])
            services = try states.map {
                try IssuerService(settings: settings, projectNumber: "123456789012", projectId: nil, keys: keys, state: $0, log: log)
            }
            var ids: [[UInt8]] = []
            let now = Int64(Date().timeIntervalSince1970)
            for i in 0..<RiskRefreshClaimTests.keys {
                let device = try SimulatedAppAttestDevice(ca: phone.ca, appId: phone.device.appId, receiptCA: phone.receiptCA)
                let service = services[i % services.count]
                let c = try await Self.challenge(service)
                let object = try device.attest(clientDataHash: AppAttestVerifier.clientDataHash(challenge: c), now: now)
                let body = #"{"key_id":"\#(Data(device.keyId).base64EncodedString())","attestation":"\#(Data(object).base64EncodedString())","challenge":"\#(IssuerJSON.encodeBase64(c))"}"#
                let outcome = await Self.call(service, "exchangeAppAttestAttestation", body)
                #expect(outcome.status == 200, "\(outcome.rule)")
                ids.append(device.keyId)
            }
            deviceKeys = ids
        }

        deinit {
            apple.stop()
            phone.cleanUp()
            try? FileManager.default.removeItem(at: dir)
        }

        static func call(_ service: IssuerService, _ method: String, _ body: String) async -> IssuerOutcome {
            let path = IssuerPath.match("/appcheck/v1/projects/123456789012/apps/\(RiskRefreshClaimTests.appId):\(method)"[...],
                                        basePath: "/appcheck")!
            return await service.handle(path, httpMethod: "POST", body: Array(body.utf8))
        }

        static func challenge(_ service: IssuerService) async throws -> [UInt8] {
            let outcome = await call(service, "generateAppAttestChallenge", "")
            return try #require(IssuerJSON.decodeBase64(try StrictJSON.parse(outcome.body).member("challenge")?.stringValue ?? ""))
        }

        /// Both refreshers' passes at once; the summaries.
        func refreshTogether() async throws -> [RiskRefresher.Summary] {
            let a = try #require(services[0].riskRefresher), b = try #require(services[1].riskRefresher)
            async let first = a.runOnce()
            async let second = b.runOnce()
            return await [first, second]
        }

        /// Both instances refresh every key at once, twice: Apple is asked once per key, every key gets its metric,
        /// and nothing is asked again within the period.
        func check(_ state: IssuerState) async throws {
            apple.setDelay(0.1)
            apple.queue([], fallback: .receipt(riskMetric: 4))
            let summaries = try await refreshTogether()
            #expect(apple.calls == RiskRefreshClaimTests.keys, "Apple asked \(apple.calls) times for \(RiskRefreshClaimTests.keys) keys")
            #expect(summaries.map(\.refreshed).reduce(0, +) == RiskRefreshClaimTests.keys, "\(summaries)")
            for id in deviceKeys {
                #expect(try await state.key(id, appId: RiskRefreshClaimTests.appId)?.riskMetric == 4)
            }
            _ = try await refreshTogether()
            #expect(apple.calls == RiskRefreshClaimTests.keys, "not due again within the period")
        }

        /// Apple failing: the first instance's pass asks Apple for the keys it had in flight (at most four at once),
        /// pauses the app and records the pause in the shared state; the second instance's pass right after reads it
        /// and asks Apple nothing. `logged` counts the log lines of the failure: one per pass, whatever the keys.
        func checkSharedPause(logged: () -> Int = { 1 }) async throws {
            let a = try #require(services[0].riskRefresher), b = try #require(services[1].riskRefresher)
            let first = await a.runOnce()
            let asked = apple.calls
            #expect((1...4).contains(asked) && first.backedOff == asked, "\(asked) calls, \(first)")
            #expect(first.skipped == RiskRefreshClaimTests.keys - asked, "\(first)")
            #expect(logged() == 1, "the failure was logged \(logged()) times in one pass")
            let second = await b.runOnce()
            #expect(apple.calls == asked, "the second instance asked Apple again during the first's pause")
            #expect(second.skipped == RiskRefreshClaimTests.keys, "\(second)")
            #expect(logged() == 1, "the second pass logged the pause again")
        }
    }

    @Test func anAppleFailurePausesEveryInstanceOnOneRedis() async throws {
        let server = try RedisServerProcess()
        defer { server.stop() }
        let states = try (0..<2).map { _ in
            try RedisIssuerState(url: server.url, keyPrefix: "appcheck:issuer:", timeout: 2, logSink: LogSink(fd: 2, level: .error))
        }
        defer { states.forEach { $0.close() } }
        let pair = try await Pair(states: states)
        pair.apple.queue([], fallback: .serverError)
        try await pair.checkSharedPause()
    }

    /// On one SQLite file, with Apple refusing our DeviceCheck key (401): one ERROR line for the pass, with the status.
    @Test func anAppleRefusalPausesEveryInstanceOnOneSQLiteFileAndIsLoggedOnce() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-\(UUID().uuidString).sqlite").path
        let logPath = path + ".log"
        defer { for suffix in ["", "-wal", "-shm", ".log"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let fd = open(logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(fd) }
        let states = [try SQLiteIssuerState(path: path), try SQLiteIssuerState(path: path)]
        let pair = try await Pair(states: states, appleRefusesOurKey: true, log: LogSink(fd: fd, level: .info))
        func lines() -> [String] {
            LogFile.completeLines(logPath)
                .filter { $0.contains("Apple refused the DeviceCheck key") }
        }
        try await pair.checkSharedPause(logged: { lines().count })
        #expect(lines().first.map { $0.contains(#""apple_status":401"#) && $0.contains(#""severity":"ERROR""#) } == true,
                "\(lines())")
    }

    @Test func twoInstancesOnOneRedisAskAppleOncePerKey() async throws {
        let server = try RedisServerProcess()
        defer { server.stop() }
        let states = try (0..<2).map { _ in
            try RedisIssuerState(url: server.url, keyPrefix: "appcheck:issuer:", timeout: 2, logSink: LogSink(fd: 2, level: .error))
        }
        defer { states.forEach { $0.close() } }
        let pair = try await Pair(states: states)
        try await pair.check(states[0])
    }

    @Test func twoInstancesOnOneSQLiteFileAskAppleOncePerKey() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let states = [try SQLiteIssuerState(path: path), try SQLiteIssuerState(path: path)]
        let pair = try await Pair(states: states)
        try await pair.check(states[0])
    }

    /// Apple's 404 (no data for the key any more) is a WARNING naming the status, once per key.
    @Test func appleHavingNoDataIsAWarningWithItsStatus() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-\(UUID().uuidString).sqlite").path
        let logPath = path + ".log"
        defer { for suffix in ["", "-wal", "-shm", ".log"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let fd = open(logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        defer { close(fd) }
        let states = [try SQLiteIssuerState(path: path), try SQLiteIssuerState(path: path)]
        let pair = try await Pair(states: states, log: LogSink(fd: fd, level: .info))
        pair.apple.queue([], fallback: .notFound)
        let a = try #require(pair.services[0].riskRefresher)
        #expect(await a.runOnce().noData == RiskRefreshClaimTests.keys)
        let lines = LogFile.completeLines(logPath)
            .filter { $0.contains("Apple has no data") }
        #expect(lines.count == RiskRefreshClaimTests.keys, "\(lines)")
        #expect(lines.allSatisfy { $0.contains(#""severity":"WARNING""#) && $0.contains(#""apple_status":404"#) }, "\(lines)")
    }
}
