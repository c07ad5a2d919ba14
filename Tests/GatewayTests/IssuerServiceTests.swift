import AppCheck
import Foundation
@testable import Gateway
@testable import GatewayConfig
@testable import Issuer
import ReplayStores
import Synchronization
import Testing

/// The issuer core (docs/issuer.md) without HTTP: challenges, debug exchanges, minting, the key set, limits, and the
/// memory state's single-use and compare-and-set rules. Real RSA keys, a manual clock.
@Suite struct IssuerServiceTests {
    static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
    static let secret = "debug-secret-0123456789"  // the service takes any secret; the config requires 22+ characters

    final class ManualClock: Sendable {
        private let value: Mutex<Double>
        init(_ start: Double) { value = Mutex(start) }
        func now() -> Double { value.withLock { $0 } }
        func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
    }

    static let key: RSAPrivateKey = {
        guard let key = try? RSAPrivateKey.generate(bits: 2048) else { fatalError("RSA key generation failed") }
        return key
    }()

    func makeService(rate: Int = 200, clock: ManualClock = ManualClock(1_800_000_000),
                     state: IssuerState = MemoryIssuerState()) throws -> IssuerService {
        var settings = IssuerSettings()
        settings.issuerURL = "https://api.example.com/appcheck"
        settings.maxExchangesPerSecond = rate
        var app = IssuerAppSettings(appId: Self.appId)
        app.teamId = "ABCDE12345"
        app.bundleId = "com.example.app"
        app.appAttest = AppAttestAppSettings()
        app.debugSecrets = [Self.secret]
        var other = IssuerAppSettings(appId: "1:123456789012:android:ff")
        other.debugSecrets = ["another-secret-that-is-long"]
        settings.apps = [app, other]
        let keys = try IssuerKeys([(kid: "k1", key: Self.key)])
        return try IssuerService(settings: settings, projectNumber: "123456789012", projectId: "demo", keys: keys,
                             state: state, clock: { clock.now() })
    }

    func call(_ service: IssuerService, _ method: String, app: String = appId, project: String = "123456789012",
              httpMethod: String = "POST", body: String = "") async -> IssuerOutcome {
        let path = IssuerPath.match("/appcheck/v1/projects/\(project)/apps/\(app):\(method)"[...], basePath: "/appcheck")
        guard let path else { Issue.record("path did not match"); return .failure(.notFound("x", "x"), appId: "", method: "") }
        return await service.handle(path, httpMethod: httpMethod, body: Array(body.utf8))
    }

    @Test func debugExchangeMintsATokenTheGatewayVerifies() async throws {
        let clock = ManualClock(1_800_000_000)
        let service = try makeService(clock: clock)
        let outcome = await call(service, "exchangeDebugToken", body: #"{"debug_token":"\#(Self.secret)"}"#)
        #expect(outcome.status == 200 && outcome.result == "minted" && outcome.rule.isEmpty)
        let body = try StrictJSON.parse(outcome.body)
        #expect(body.member("ttl")?.stringValue == "3600s")
        let token = try #require(body.member("token")?.stringValue)
        let policy = AppCheckPolicy(projectNumber: "123456789012", projectId: "demo").withIssuer(service.tokenIssuer)
        let claims = try AppCheckVerifier.verify(token: Array(token.utf8), keys: service.keys.keySet, policy: policy,
                                                 now: clock.now()).get()
        #expect(claims.appId == Self.appId)
        #expect(claims.provider == "debug")
        #expect(claims.lifetime == 3600)
        #expect(claims.jti?.count == 22, "128 random bits in base64url")
        #expect(claims.audiences == ["projects/123456789012", "projects/demo"])
        // A key of the own issuer cannot vouch for Firebase's issuer.
        #expect(AppCheckVerifier.verify(token: Array(token.utf8), keys: service.keys.keySet,
                                        policy: AppCheckPolicy(projectNumber: "123456789012", projectId: "demo"),
                                        now: clock.now()) == .failure(.wrongIssuer))

        let limited = await call(service, "exchangeDebugToken", project: "demo",
                                 body: #"{"debugToken":"\#(Self.secret)","limitedUse":true}"#)
        #expect(limited.status == 200)
        #expect(try StrictJSON.parse(limited.body).member("ttl")?.stringValue == "300s")

        // Two tokens never share a jti.
        let again = await call(service, "exchangeDebugToken", body: #"{"debug_token":"\#(Self.secret)"}"#)
        #expect(again.body != outcome.body)
    }

    @Test func refusalsAreTheirCategoryAndNameTheRule() async throws {
        let service = try makeService()
        let wrong = await call(service, "exchangeDebugToken", body: #"{"debug_token":"not-the-secret-at-all"}"#)
        #expect((wrong.status, wrong.result, wrong.rule) == (403, "permission_denied", "debug_secret_unknown"))
        #expect(!String(decoding: wrong.body, as: UTF8.self).contains("secret"))
        let otherApps = await call(service, "exchangeDebugToken", body: #"{"debug_token":"another-secret-that-is-long"}"#)
        #expect(otherApps.status == 403, "a secret of another app is refused")
        #expect(await call(service, "exchangeDebugToken", body: "{").rule == "body_not_json")
        #expect(await call(service, "exchangeDebugToken", body: "{}").rule == "missing_debug_token")
        #expect(await call(service, "exchangeDebugToken", project: "999").rule == "unknown_project")
        #expect(await call(service, "exchangeDebugToken", app: "1:123456789012:ios:beef").rule == "unknown_app")
        #expect(await call(service, "exchangeDeviceCheckToken").rule == "method_not_enabled")
        #expect(await call(service, "generateAppAttestChallenge", app: "1:123456789012:android:ff").rule == "method_not_enabled")
        #expect(await call(service, "exchangeDebugToken", httpMethod: "GET").rule == "method_not_post")
        let big = await call(service, "exchangeDebugToken", body: "{\"debug_token\":\"" + String(repeating: "x", count: 70_000) + "\"}")
        #expect((big.status, big.rule) == (413, "body_too_large"))
    }

    @Test func challengesAreRandomBoundAndSingleUse() async throws {
        let clock = ManualClock(1_800_000_000)
        let state = MemoryIssuerState()
        let service = try makeService(clock: clock, state: state)
        let first = await call(service, "generateAppAttestChallenge")
        #expect(first.status == 200 && first.result == "challenge")
        let body = try StrictJSON.parse(first.body)
        #expect(body.member("ttl")?.stringValue == "300s")
        let challengeText = try #require(body.member("challenge")?.stringValue)
        let challenge = try #require(IssuerJSON.decodeBase64(challengeText))
        #expect(challenge.count == 32)
        let second = try await issued(service)
        #expect(second != challenge)

        #expect(try await state.takeChallenge(challenge, appId: "1:123456789012:android:ff", now: clock.now()) == false,
                "bound to its app — and used up by the wrong app's attempt")
        #expect(try await state.takeChallenge(challenge, appId: Self.appId, now: clock.now()) == false)
        #expect(try await state.takeChallenge(second, appId: Self.appId, now: clock.now()) == true)
        #expect(try await state.takeChallenge(second, appId: Self.appId, now: clock.now()) == false, "single use")

        let third = try await issued(service)
        clock.advance(300)
        #expect(try await state.takeChallenge(third, appId: Self.appId, now: clock.now()) == false, "expired after challenge_ttl")
    }

    func issued(_ service: IssuerService) async throws -> [UInt8] {
        let outcome = await call(service, "generateAppAttestChallenge", body: "{}")
        let text = try StrictJSON.parse(outcome.body).member("challenge")?.stringValue ?? ""
        return try #require(IssuerJSON.decodeBase64(text))
    }

    @Test func theRateLimitCountsChallengesAndExchanges() async throws {
        let clock = ManualClock(1_800_000_000)
        let service = try makeService(rate: 3, clock: clock)
        #expect(await call(service, "generateAppAttestChallenge").status == 200)
        #expect(await call(service, "exchangeDebugToken", body: #"{"debug_token":"\#(Self.secret)"}"#).status == 200)
        #expect(await call(service, "exchangeDebugToken", body: #"{"debug_token":"wrong-wrong-wrong-wrong"}"#).status == 403)
        let limited = await call(service, "exchangeDebugToken", body: #"{"debug_token":"\#(Self.secret)"}"#)
        #expect((limited.status, limited.result) == (429, "resource_exhausted"))
        clock.advance(1)
        #expect(await call(service, "exchangeDebugToken", body: #"{"debug_token":"\#(Self.secret)"}"#).status == 200)
    }

    @Test func theKeySetIsPublished() async throws {
        let service = try makeService()
        let jwks = await service.handle(.jwks, httpMethod: "GET", body: [])
        #expect(jwks.status == 200)
        #expect(jwks.headers.contains { $0 == ("Cache-Control", "public, max-age=3600") })
        let set = try JWKSet.parse(jwks.body)
        #expect(set.kids == ["k1"])
        #expect(await service.handle(.jwks, httpMethod: "POST", body: []).status == 404)
    }

    @Test func memoryStateCountersPassOnce() async throws {
        let state = MemoryIssuerState()
        let key = AttestedKey(keyId: [1, 2, 3], appId: Self.appId, publicKey: [4], counter: 0, environment: "production",
                              receipt: [], attestedAt: 0)
        #expect(try await state.insertKey(key) == true)
        #expect(try await state.insertKey(key) == false)
        #expect(try await state.key([1, 2, 3], appId: "1:1:ios:other") == nil)
        let (wins, errors) = await withTaskGroup(of: Result<CounterVerdict, any Error>.self) { group in
            for _ in 0..<64 { group.addTask { await Result { try await state.acceptCounter([1, 2, 3], appId: Self.appId, counter: 1) } } }
            var count = 0
            var errors: [String] = []
            for await r in group {
                switch r {
                case .success(let v): if v == .accepted { count += 1 }
                case .failure(let e): errors.append("\(e)")
                }
            }
            return (count, errors)
        }
        #expect(errors.isEmpty, "an error is not a lost race: \(errors)")
        #expect(wins == 1, "64 assertions with the same counter: exactly one passes")
        #expect(try await state.acceptCounter([1, 2, 3], appId: Self.appId, counter: 1) == .repeated)
        #expect(try await state.acceptCounter([1, 2, 3], appId: Self.appId, counter: 5) == .accepted)
        #expect(try await state.acceptCounter([1, 2, 3], appId: Self.appId, counter: 3) == .accepted, "out of order, once")
        #expect(try await state.key([1, 2, 3], appId: Self.appId)?.counter == 5)

        #expect(try await state.consumeOnce([9], expiresAt: 100, now: 0) == true)
        #expect(try await state.consumeOnce([9], expiresAt: 100, now: 50) == false)
        #expect(try await state.consumeOnce([9], expiresAt: 200, now: 100) == true, "expired entries no longer count")
    }

    @Test func outstandingChallengesAreBounded() async throws {
        let state = MemoryIssuerState(maxChallenges: 4)
        for i in 0..<4 {
            #expect(try await state.putChallenge([UInt8(i)], appId: Self.appId, address: "", now: 0, expiresAt: 10,
                                                 maxPerAddress: 0) == .stored)
        }
        #expect(try await state.putChallenge([9], appId: Self.appId, address: "", now: 1, expiresAt: 11, maxPerAddress: 0) == .storeFull)
        // The expired ones were swept.
        #expect(try await state.putChallenge([9], appId: Self.appId, address: "", now: 10, expiresAt: 20, maxPerAddress: 0) == .stored)
        #expect(state.counts.challenges == 1)
    }

    @Test func aFullChallengeStoreIsUnavailableNotAnError() async throws {
        let service = try makeService(state: MemoryIssuerState(maxChallenges: 1))
        #expect(await call(service, "generateAppAttestChallenge").status == 200)
        let full = await call(service, "generateAppAttestChallenge")
        #expect((full.status, full.rule, full.result) == (503, "challenge_store_full", "unavailable"))
    }
}
