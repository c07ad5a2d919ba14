import Foundation
import JSONLog
import Testing
import TestSupport
@testable import ReplayStores

/// The issuer's state (docs/issuer.md) in memory, SQLite and Redis: the same single-use and compare-and-set rules,
/// durability across reopening, and atomicity across two stores on one file or one Redis server.
@Suite struct IssuerStateTests {
    static let app = "1:123456789012:ios:0a1b2c3d4e5f6a7b"

    static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("issuer-\(UUID().uuidString).sqlite").path
    }

    static func key(_ id: UInt8) -> AttestedKey {
        AttestedKey(keyId: [UInt8](repeating: id, count: 32), appId: app, publicKey: [4] + [UInt8](repeating: id, count: 64),
                    counter: 0, environment: "production", receipt: [1, 2, 3], attestedAt: 1_800_000_000)
    }

    /// The rules every store must keep.
    static func exercise(_ state: IssuerState) async throws {
        try await state.putChallenge([1], appId: app, now: 100, expiresAt: 400)
        try await state.putChallenge([2], appId: app, now: 100, expiresAt: 400)
        #expect(try await state.takeChallenge([1], appId: "1:1:ios:other", now: 101) == false, "bound to its app")
        #expect(try await state.takeChallenge([1], appId: app, now: 101) == false, "and used up by that attempt")
        #expect(try await state.takeChallenge([2], appId: app, now: 400) == false, "expired")
        try await state.putChallenge([3], appId: app, now: 100, expiresAt: 400)
        #expect(try await state.takeChallenge([3], appId: app, now: 399) == true)
        #expect(try await state.takeChallenge([3], appId: app, now: 399) == false, "single use")
        #expect(try await state.takeChallenge([9], appId: app, now: 1) == false, "never issued")

        let k = key(7)
        #expect(try await state.insertKey(k) == true)
        #expect(try await state.insertKey(k) == false)
        #expect(try await state.key(k.keyId, appId: app) == k)
        #expect(try await state.key(k.keyId, appId: "1:1:ios:other") == nil)
        #expect(try await state.advanceCounter(k.keyId, appId: app, to: 0) == false, "strictly greater")
        #expect(try await state.advanceCounter(k.keyId, appId: app, to: 3) == true)
        #expect(try await state.advanceCounter(k.keyId, appId: app, to: 2) == false)
        #expect(try await state.advanceCounter(k.keyId, appId: "1:1:ios:other", to: 9) == false)
        #expect(try await state.key(k.keyId, appId: app)?.counter == 3)

        #expect(try await state.consumeOnce([5], expiresAt: 200, now: 100) == true)
        #expect(try await state.consumeOnce([5], expiresAt: 300, now: 150) == false)
        #expect(try await state.consumeOnce([5], expiresAt: 300, now: 200) == true, "an expired input counts no more")
    }

    @Test func memoryKeepsTheRules() async throws {
        try await Self.exercise(MemoryIssuerState())
    }

    @Test func sqliteKeepsTheRulesAndSurvivesReopening() async throws {
        let path = Self.temporaryPath()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        do {
            let state = try SQLiteIssuerState(path: path)
            try await Self.exercise(state)
        }
        let reopened = try SQLiteIssuerState(path: path)
        #expect(try await reopened.key(Self.key(7).keyId, appId: Self.app)?.counter == 3, "keys and counters are durable")
        #expect(try await reopened.consumeOnce([5], expiresAt: 400, now: 250) == false, "used inputs are durable")
    }

    @Test func twoSQLiteStoresOnOneFileLetExactlyOneAssertionWin() async throws {
        let path = Self.temporaryPath()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let a = try SQLiteIssuerState(path: path), b = try SQLiteIssuerState(path: path)
        let k = Self.key(1)
        #expect(try await a.insertKey(k) == true)
        #expect(try await b.insertKey(k) == false, "the second store sees the first's key")
        let wins = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<40 {
                let store = i % 2 == 0 ? a : b
                group.addTask { (try? await store.advanceCounter(k.keyId, appId: Self.app, to: 1)) ?? false }
            }
            var count = 0
            for await won in group where won { count += 1 }
            return count
        }
        #expect(wins == 1, "40 assertions with the same counter through two stores: exactly one passes")
        try await a.putChallenge([42], appId: Self.app, now: 0, expiresAt: 100)
        async let first = a.takeChallenge([42], appId: Self.app, now: 1)
        async let second = b.takeChallenge([42], appId: Self.app, now: 1)
        let taken = try await [first, second].filter { $0 }.count
        #expect(taken == 1, "a challenge is taken once across stores")
    }

    @Test func anUnopenablePathIsAClearError() {
        #expect(throws: IssuerStateError.self) { _ = try SQLiteIssuerState(path: "/nonexistent-dir/issuer.sqlite") }
    }

    // MARK: Redis (a real redis-server)

    static func redisState(_ server: RedisServerProcess) throws -> RedisIssuerState {
        try RedisIssuerState(url: server.url, keyPrefix: "appcheck:issuer:", timeout: 2, logSink: LogSink(fd: 2, level: .error))
    }

    @Test func redisKeepsTheRulesAndSurvivesReopening() async throws {
        let server = try RedisServerProcess()
        defer { server.stop() }
        let state = try Self.redisState(server)
        try await Self.exercise(state)
        state.close()
        let reopened = try Self.redisState(server)
        defer { reopened.close() }
        #expect(try await reopened.key(Self.key(7).keyId, appId: Self.app)?.counter == 3, "keys and counters are in Redis")
        #expect(try await reopened.key(Self.key(7).keyId, appId: Self.app) == Self.key(7).withCounter(3))
        #expect(try await reopened.consumeOnce([5], expiresAt: 400, now: 250) == false, "used inputs are in Redis")
    }

    @Test func twoRedisStoresOnOneServerLetExactlyOneAssertionWin() async throws {
        let server = try RedisServerProcess()
        defer { server.stop() }
        let a = try Self.redisState(server), b = try Self.redisState(server)
        defer { a.close(); b.close() }
        let k = Self.key(1)
        #expect(try await a.insertKey(k) == true)
        #expect(try await b.insertKey(k) == false, "the second instance sees the first's key")
        let wins = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<40 {
                let store = i % 2 == 0 ? a : b
                group.addTask { (try? await store.advanceCounter(k.keyId, appId: Self.app, to: 1)) ?? false }
            }
            var count = 0
            for await won in group where won { count += 1 }
            return count
        }
        #expect(wins == 1, "40 assertions with the same counter through two instances: exactly one passes")
        try await a.putChallenge([42], appId: Self.app, now: 0, expiresAt: 100)
        async let first = a.takeChallenge([42], appId: Self.app, now: 1)
        async let second = b.takeChallenge([42], appId: Self.app, now: 1)
        let taken = try await [first, second].filter { $0 }.count
        #expect(taken == 1, "a challenge is taken once across instances")
    }

    @Test func anUnreachableRedisIsUnavailableNotACrash() async throws {
        let port = try TestPKI.freePort()
        let state = try RedisIssuerState(url: "redis://127.0.0.1:\(port)/0", keyPrefix: "x:", timeout: 0.3,
                                         logSink: LogSink(fd: 2, level: .error))
        defer { state.close() }
        await #expect(throws: IssuerStateError.self) { try await state.putChallenge([1], appId: Self.app, now: 0, expiresAt: 10) }
        #expect(throws: IssuerStateError.self) { _ = try RedisIssuerState(url: "http://x", keyPrefix: "x:", logSink: LogSink(fd: 2, level: .error)) }
    }
}

extension AttestedKey {
    func withCounter(_ c: UInt32) -> AttestedKey {
        var k = self
        k.counter = c
        return k
    }
}

/// Issuer state on a real 3-master `redis-server --cluster-enabled yes` (docs/issuer.md "State"): the same rules,
/// two instances on one cluster never both win, an entity's keys share one hash tag (its slot), and a master that
/// is gone fails closed (an error, never a "yes") until it is back.
@Suite(.serialized) struct IssuerStateClusterTests {
    @Test func clusterKeepsTheRulesAcrossInstancesAndFailsClosed() async throws {
        let cluster = try RedisClusterProcess()
        defer { cluster.stop() }
        let log = LogSink(fd: 2, level: .error)
        let a = try RedisIssuerState(url: cluster.url, keyPrefix: "appcheck:issuer:", timeout: 2, logSink: log)
        let b = try RedisIssuerState(url: cluster.url, keyPrefix: "appcheck:issuer:", timeout: 2, logSink: log)
        defer { a.close(); b.close() }
        try await IssuerStateTests.exercise(a)

        // Many keys, spread over the masters: each inserted once, and 20 racing assertions per key win once.
        let keys = (10..<40).map { IssuerStateTests.key(UInt8($0)) }
        for k in keys {
            #expect(try await a.insertKey(k) == true)
            #expect(try await b.insertKey(k) == false)
        }
        let wins = await withTaskGroup(of: Bool.self) { group in
            for k in keys {
                for i in 0..<20 {
                    let store = i % 2 == 0 ? a : b
                    group.addTask { (try? await store.advanceCounter(k.keyId, appId: IssuerStateTests.app, to: 1)) ?? false }
                }
            }
            var count = 0
            for await won in group where won { count += 1 }
            return count
        }
        #expect(wins == keys.count, "one win per key, \(keys.count) keys")
        let owners = try Set(cluster.nodes.map { try $0.cli(["DBSIZE"]) })
        #expect(owners.count > 1 || !owners.contains("0"), "the keys spread over the masters")

        // One master gone: operations on its slots throw (503 at the API), none answers "yes".
        let victim = cluster.nodes[2]
        victim.stop()
        var failures = 0, wrongYes = 0
        for k in keys {
            do {
                if try await a.advanceCounter(k.keyId, appId: IssuerStateTests.app, to: 2) {
                    // Keys on the live masters still advance, once.
                    if try await b.advanceCounter(k.keyId, appId: IssuerStateTests.app, to: 2) { wrongYes += 1 }
                }
            } catch {
                failures += 1
            }
        }
        #expect(failures > 0, "some keys live on the stopped master")
        #expect(wrongYes == 0)
    }
}
