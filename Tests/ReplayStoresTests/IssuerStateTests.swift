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

    /// Puts a challenge with no per-address bound; it must be stored.
    static func put(_ state: IssuerState, _ challenge: [UInt8], now: Double, expiresAt: Double) async throws {
        let admission = try await state.putChallenge(challenge, appId: app, address: "", now: now, expiresAt: expiresAt,
                                                     maxPerAddress: 0)
        #expect(admission == .stored)
    }

    /// The rules every store must keep.
    static func exercise(_ state: IssuerState) async throws {
        try await put(state, [1], now: 100, expiresAt: 400)
        try await put(state, [2], now: 100, expiresAt: 400)
        #expect(try await state.takeChallenge([1], appId: "1:1:ios:other", now: 101) == false, "bound to its app")
        #expect(try await state.takeChallenge([1], appId: app, now: 101) == false, "and used up by that attempt")
        #expect(try await state.takeChallenge([2], appId: app, now: 400) == false, "expired")
        try await put(state, [3], now: 100, expiresAt: 400)
        #expect(try await state.takeChallenge([3], appId: app, now: 399) == true)
        #expect(try await state.takeChallenge([3], appId: app, now: 399) == false, "single use")
        #expect(try await state.takeChallenge([9], appId: app, now: 1) == false, "never issued")

        let k = key(7)
        #expect(try await state.insertKey(k) == true)
        #expect(try await state.insertKey(k) == false)
        #expect(try await state.key(k.keyId, appId: app) == k)
        #expect(try await state.key(k.keyId, appId: "1:1:ios:other") == nil)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 0) == .repeated, "0 is the attestation's")
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 3) == .accepted)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 3) == .repeated)
        #expect(try await state.acceptCounter(k.keyId, appId: "1:1:ios:other", counter: 9) == .unknownKey)
        #expect(try await state.acceptCounter([UInt8](repeating: 99, count: 32), appId: app, counter: 9) == .unknownKey)
        #expect(try await state.key(k.keyId, appId: app) == k.withCounter(3, window: 1 << 2), "0 is marked 3 below")

        #expect(try await state.consumeOnce([5], expiresAt: 200, now: 100) == true)
        #expect(try await state.consumeOnce([5], expiresAt: 300, now: 150) == false)
        #expect(try await state.consumeOnce([5], expiresAt: 300, now: 200) == true, "an expired input counts no more")
    }

    /// The counter window (docs/issuer.md "State") through the store: out-of-order counters pass once each.
    static func exerciseCounterWindow(_ state: IssuerState) async throws {
        let k = key(8)
        #expect(try await state.insertKey(k) == true)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 5) == .accepted)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 4) == .accepted, "late but never seen")
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 4) == .repeated)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 5) == .repeated)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 0) == .repeated)
        #expect(try await state.key(k.keyId, appId: app) == k.withCounter(5, window: 1 << 4 | 1))
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 100) == .accepted)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 35) == .belowWindow, "65 below the highest")
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 36) == .accepted, "64 below the highest")
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 36) == .repeated)
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 99) == .accepted)
        #expect(try await state.key(k.keyId, appId: app) == k.withCounter(100, window: 1 << 63 | 1))
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 165) == .accepted, "a shift of 65 empties the window")
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 101) == .accepted, "64 below")
        #expect(try await state.acceptCounter(k.keyId, appId: app, counter: 100) == .belowWindow, "the old highest fell out")
        #expect(try await state.key(k.keyId, appId: app) == k.withCounter(165, window: 1 << 63))
    }

    /// 32 distinct counters, shuffled, raced over `stores` (two instances on one store): each accepted exactly once;
    /// then the same 32 again, all refused; then 40 racing one new counter, one accepted.
    static func raceCounters(_ stores: [IssuerState], key id: UInt8) async throws {
        let k = key(id)
        #expect(try await stores[0].insertKey(k) == true)
        #expect(try await stores[stores.count - 1].insertKey(k) == false, "every instance sees the first's key")
        // An error is not a lost race: errors are collected apart, and there must be none.
        func race(_ counters: [UInt32]) async -> [CounterVerdict] {
            let (verdicts, errors) = await withTaskGroup(of: Result<CounterVerdict, any Error>.self) { group in
                for (i, c) in counters.enumerated() {
                    let store = stores[i % stores.count]
                    group.addTask { await Result { try await store.acceptCounter(k.keyId, appId: app, counter: c) } }
                }
                var all: [CounterVerdict] = []
                var errors: [String] = []
                for await r in group {
                    switch r {
                    case .success(let v): all.append(v)
                    case .failure(let e): errors.append("\(e)")
                    }
                }
                return (all, errors)
            }
            #expect(errors.isEmpty, "\(errors)")
            return verdicts
        }
        let first = await race(Array(UInt32(1)...32).shuffled())
        #expect(first.filter { $0 == .accepted }.count == 32, "\(first)")
        let again = await race(Array(UInt32(1)...32).shuffled())
        #expect(again.allSatisfy { $0 == .repeated }, "\(again)")
        let same = await race([UInt32](repeating: 40, count: 40))
        #expect(same.filter { $0 == .accepted }.count == 1 && same.filter { $0 == .repeated }.count == 39, "\(same)")
        #expect(try await stores[0].key(k.keyId, appId: app)?.counter == 40)
    }

    /// The per-address challenge bound (docs/issuer.md "State"), with `maxPerAddress` 3.
    static func exerciseChallengeCaps(_ state: IssuerState) async throws {
        func put(_ n: UInt8, _ address: String, now: Double = 100, max: Int = 3) async throws -> ChallengeAdmission {
            try await state.putChallenge([0xCA, n], appId: app, address: address, now: now, expiresAt: now + 10, maxPerAddress: max)
        }
        #expect(try await put(1, "192.0.2.1") == .stored)
        #expect(try await put(2, "192.0.2.1") == .stored)
        #expect(try await put(3, "192.0.2.1") == .stored)
        #expect(try await put(4, "192.0.2.1") == .addressFull, "a fourth from one address")
        #expect(try await put(5, "2001:db8:1:2::/64") == .stored, "another address is not held back")
        #expect(try await state.takeChallenge([0xCA, 4], appId: app, now: 100) == false, "the refused one was not stored")
        #expect(try await state.takeChallenge([0xCA, 2], appId: app, now: 101) == true)
        #expect(try await put(6, "192.0.2.1", now: 101) == .stored, "taking one frees a slot")
        #expect(try await put(7, "192.0.2.1", now: 101) == .addressFull)
        // 1 and 3 expire at 110, 6 at 111: at 110.5 two slots are free again.
        #expect(try await put(8, "192.0.2.1", now: 110.5) == .stored, "an expired one frees a slot")
        #expect(try await put(9, "192.0.2.1", now: 110.5) == .stored)
        #expect(try await put(10, "192.0.2.1", now: 110.5) == .addressFull)
        #expect(try await state.takeChallenge([0xCA, 8], appId: app, now: 111) == true)
        #expect(try await state.takeChallenge([0xCA, 5], appId: app, now: 111) == false, "expired at 110")
        // No bound: maxPerAddress 0.
        for n in UInt8(20)..<UInt8(30) { #expect(try await put(n, "198.51.100.7", max: 0) == .stored) }
    }

    /// A store capped at 4 outstanding challenges: the fifth is `storeFull` until one is taken or expires.
    static func exerciseGlobalCap(_ state: IssuerState) async throws {
        func put(_ n: UInt8, now: Double) async throws -> ChallengeAdmission {
            try await state.putChallenge([0xCB, n], appId: app, address: "a\(n)", now: now, expiresAt: now + 10, maxPerAddress: 3)
        }
        for n in UInt8(1)...4 { #expect(try await put(n, now: 0) == .stored) }
        #expect(try await put(5, now: 1) == .storeFull)
        #expect(try await state.takeChallenge([0xCB, 1], appId: app, now: 2) == true)
        #expect(try await put(6, now: 2) == .stored, "taking one frees room")
        #expect(try await put(7, now: 3) == .storeFull)
        #expect(try await put(8, now: 10) == .stored, "the expired ones were swept")
    }

    @Test func memoryKeepsTheRules() async throws {
        try await Self.exercise(MemoryIssuerState())
        try await Self.exerciseCounterWindow(MemoryIssuerState())
        try await Self.raceCounters([MemoryIssuerState()], key: 1)
        try await Self.exerciseChallengeCaps(MemoryIssuerState())
        try await Self.exerciseGlobalCap(MemoryIssuerState(maxChallenges: 4))
    }

    @Test func memoryCountsAddressesAndForgetsEmptyOnes() async throws {
        let state = MemoryIssuerState()
        try await Self.exerciseChallengeCaps(state)
        #expect(state.outstanding(address: "192.0.2.1") == 2, "9 and 6")
        _ = try await state.takeChallenge([0xCA, 9], appId: Self.app, now: 112)
        _ = try await state.takeChallenge([0xCA, 6], appId: Self.app, now: 112)
        #expect(state.outstanding(address: "192.0.2.1") == 0)
    }

    /// At a bound, the O(n) sweep runs at most once a second of `now`: an entry that expired since the last sweep
    /// still counts until a second has passed.
    @Test func memorySweepsAtMostOnceASecondWhenFull() async throws {
        let state = MemoryIssuerState(maxChallenges: 2)
        func put(_ n: UInt8, now: Double, expiresAt: Double) async throws -> ChallengeAdmission {
            try await state.putChallenge([n], appId: Self.app, address: "a", now: now, expiresAt: expiresAt, maxPerAddress: 0)
        }
        #expect(try await put(1, now: 0, expiresAt: 5) == .stored)
        #expect(try await put(2, now: 0, expiresAt: 100) == .stored)
        #expect(try await put(3, now: 4.5, expiresAt: 100) == .storeFull, "swept at 4.5: nothing expired")
        #expect(try await put(3, now: 5.2, expiresAt: 100) == .storeFull, "1 expired, but the last sweep was 0.7 s ago")
        #expect(try await put(3, now: 5.5, expiresAt: 100) == .stored, "swept again")
        #expect(state.counts.challenges == 2 && state.outstanding(address: "a") == 2)
    }

    @Test func sqliteKeepsTheRulesAndSurvivesReopening() async throws {
        let path = Self.temporaryPath()
        defer { Self.remove(path) }
        do {
            let state = try SQLiteIssuerState(path: path)
            try await Self.exercise(state)
            try await Self.exerciseCounterWindow(state)
            try await Self.exerciseChallengeCaps(state)
        }
        let reopened = try SQLiteIssuerState(path: path)
        #expect(try await reopened.key(Self.key(7).keyId, appId: Self.app) == Self.key(7).withCounter(3, window: 1 << 2),
                "keys, counters and windows are durable")
        #expect(try await reopened.acceptCounter(Self.key(8).keyId, appId: Self.app, counter: 101) == .repeated)
        #expect(try await reopened.consumeOnce([5], expiresAt: 400, now: 250) == false, "used inputs are durable")
        #expect(try await reopened.putChallenge([0xCA, 11], appId: Self.app, address: "192.0.2.1", now: 110.5,
                                                expiresAt: 120, maxPerAddress: 2) == .addressFull,
                "outstanding challenges per address are durable")
        let small = try SQLiteIssuerState(path: Self.temporaryPath().replacingOccurrences(of: ".sqlite", with: "-cap.sqlite"),
                                          maxChallenges: 4)
        try await Self.exerciseGlobalCap(small)
    }

    static func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    @Test func twoSQLiteStoresOnOneFileAcceptEachCounterOnce() async throws {
        let path = Self.temporaryPath()
        defer { Self.remove(path) }
        let a = try SQLiteIssuerState(path: path), b = try SQLiteIssuerState(path: path)
        try await Self.raceCounters([a, b], key: 1)
        _ = try await a.putChallenge([42], appId: Self.app, address: "x", now: 0, expiresAt: 100, maxPerAddress: 1)
        #expect(try await b.putChallenge([43], appId: Self.app, address: "x", now: 0, expiresAt: 100, maxPerAddress: 1) == .addressFull,
                "the bound holds across stores")
        async let first = a.takeChallenge([42], appId: Self.app, now: 1)
        async let second = b.takeChallenge([42], appId: Self.app, now: 1)
        let taken = try await [first, second].filter { $0 }.count
        #expect(taken == 1, "a challenge is taken once across stores")
        #expect(try await b.putChallenge([43], appId: Self.app, address: "x", now: 1, expiresAt: 100, maxPerAddress: 1) == .stored)
    }

    /// A file written before the counter window and the per-address bound (the old `CREATE TABLE`s, made with the
    /// `sqlite3` shell) opens, keeps its keys and challenges, and gets the new rules.
    @Test func anOldSQLiteFileIsMigrated() async throws {
        let path = Self.temporaryPath()
        defer { Self.remove(path) }
        let keyHex = String(repeating: "07", count: 32), pubHex = "04" + String(repeating: "07", count: 64)
        let old = """
            CREATE TABLE challenges (challenge BLOB PRIMARY KEY, app_id TEXT NOT NULL, expires_at REAL NOT NULL);
            CREATE TABLE attested_keys (key_id BLOB NOT NULL, app_id TEXT NOT NULL, public_key BLOB NOT NULL,
                counter INTEGER NOT NULL, environment TEXT NOT NULL, receipt BLOB NOT NULL, attested_at REAL NOT NULL,
                PRIMARY KEY (key_id));
            CREATE TABLE used_inputs (digest BLOB PRIMARY KEY, expires_at REAL NOT NULL);
            INSERT INTO attested_keys VALUES (X'\(keyHex)', '\(Self.app)', X'\(pubHex)', 3, 'production', X'010203', 1800000000);
            INSERT INTO challenges VALUES (X'2A', '\(Self.app)', 500);
            INSERT INTO challenges VALUES (X'2B', '\(Self.app)', 500);
            """
        let made = try BoundedCommand.run("/usr/bin/sqlite3", [path, old])
        #expect(made.status == 0, "\(made)")
        let a = try SQLiteIssuerState(path: path, maxChallenges: 3)
        let b = try SQLiteIssuerState(path: path, maxChallenges: 3)
        #expect(try await a.key(Self.key(7).keyId, appId: Self.app) == Self.key(7).withCounter(3, window: 0))
        #expect(try await a.acceptCounter(Self.key(7).keyId, appId: Self.app, counter: 2) == .accepted)
        #expect(try await b.acceptCounter(Self.key(7).keyId, appId: Self.app, counter: 2) == .repeated)
        #expect(try await b.acceptCounter(Self.key(7).keyId, appId: Self.app, counter: 3) == .repeated)
        #expect(try await b.key(Self.key(7).keyId, appId: Self.app) == Self.key(7).withCounter(3, window: 1))
        // The two old challenges count toward the cap of 3.
        #expect(try await a.putChallenge([1], appId: Self.app, address: "x", now: 100, expiresAt: 200, maxPerAddress: 1) == .stored)
        #expect(try await b.putChallenge([2], appId: Self.app, address: "y", now: 100, expiresAt: 200, maxPerAddress: 1) == .storeFull)
        #expect(try await b.takeChallenge([0x2A], appId: Self.app, now: 101) == true, "an old challenge still works")
        #expect(try await b.putChallenge([2], appId: Self.app, address: "x", now: 101, expiresAt: 200, maxPerAddress: 1) == .addressFull)
        #expect(try await b.putChallenge([2], appId: Self.app, address: "y", now: 101, expiresAt: 200, maxPerAddress: 1) == .stored)
        let columns = try BoundedCommand.run("/usr/bin/sqlite3", [path, "SELECT name FROM pragma_table_info('challenges')"])
        #expect(columns.stdout.split(separator: "\n") == ["challenge", "app_id", "expires_at", "address"])
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
        try await Self.exerciseCounterWindow(state)
        try await Self.exerciseChallengeCaps(state)
        // Two outstanding challenges with an hour to live (Redis expires them in real time, so the ones above,
        // with 10 s, may be gone on a loaded machine by the time the store is reopened).
        for n in UInt8(40)...41 {
            #expect(try await state.putChallenge([0xCA, n], appId: Self.app, address: "192.0.2.99", now: 100,
                                                 expiresAt: 3700, maxPerAddress: 2) == .stored)
        }
        state.close()
        let reopened = try Self.redisState(server)
        defer { reopened.close() }
        #expect(try await reopened.key(Self.key(7).keyId, appId: Self.app) == Self.key(7).withCounter(3, window: 1 << 2),
                "keys, counters and windows are in Redis")
        #expect(try await reopened.acceptCounter(Self.key(8).keyId, appId: Self.app, counter: 101) == .repeated)
        #expect(try await reopened.consumeOnce([5], expiresAt: 400, now: 250) == false, "used inputs are in Redis")
        #expect(try await reopened.putChallenge([0xCA, 42], appId: Self.app, address: "192.0.2.99", now: 101,
                                                expiresAt: 3700, maxPerAddress: 2) == .addressFull,
                "outstanding challenges per address are in Redis")
        // A key stored before the window existed (no `win` field) reads and accepts as an empty window.
        let k = Self.key(9)
        #expect(try await reopened.insertKey(k) == true)
        _ = try server.cli(["HDEL", "appcheck:issuer:k:{" + String(repeating: "09", count: 32) + "}", "win"])
        #expect(try await reopened.key(k.keyId, appId: Self.app) == k)
        #expect(try await reopened.acceptCounter(k.keyId, appId: Self.app, counter: 2) == .accepted)
        #expect(try await reopened.acceptCounter(k.keyId, appId: Self.app, counter: 1) == .accepted)
        #expect(try await reopened.key(k.keyId, appId: Self.app) == k.withCounter(2, window: 0b11))
    }

    @Test func twoRedisStoresOnOneServerAcceptEachCounterOnce() async throws {
        let server = try RedisServerProcess()
        defer { server.stop() }
        let a = try Self.redisState(server), b = try Self.redisState(server)
        defer { a.close(); b.close() }
        try await Self.raceCounters([a, b], key: 1)
        _ = try await a.putChallenge([42], appId: Self.app, address: "x", now: 0, expiresAt: 100, maxPerAddress: 1)
        #expect(try await b.putChallenge([43], appId: Self.app, address: "x", now: 0, expiresAt: 100, maxPerAddress: 1) == .addressFull,
                "the bound holds across instances")
        async let first = a.takeChallenge([42], appId: Self.app, now: 1)
        async let second = b.takeChallenge([42], appId: Self.app, now: 1)
        let taken = try await [first, second].filter { $0 }.count
        #expect(taken == 1, "a challenge is taken once across instances")
        #expect(try await b.putChallenge([43], appId: Self.app, address: "x", now: 1, expiresAt: 100, maxPerAddress: 1) == .stored)
    }

    @Test func aRedisAtMaxmemoryIsStoreFull() async throws {
        // A server already past its maxmemory (1 byte) with nothing to evict refuses every write with OOM.
        let server = try RedisServerProcess(extraArguments: ["--maxmemory", "1", "--maxmemory-policy", "noeviction"])
        defer { server.stop() }
        let state = try Self.redisState(server)
        defer { state.close() }
        #expect(try await state.putChallenge([1], appId: Self.app, address: "", now: 0, expiresAt: 10, maxPerAddress: 0) == .storeFull)
        #expect(try await state.putChallenge([1], appId: Self.app, address: "x", now: 0, expiresAt: 10, maxPerAddress: 3) == .storeFull)
    }

    @Test func anUnreachableRedisIsUnavailableNotACrash() async throws {
        let (fd, port) = try TestPKI.refusingPort()  // a free port could be taken by a parallel test's redis-server
        defer { close(fd) }
        let state = try RedisIssuerState(url: "redis://127.0.0.1:\(port)/0", keyPrefix: "x:", timeout: 0.3,
                                         logSink: LogSink(fd: 2, level: .error))
        defer { state.close() }
        await #expect(throws: IssuerStateError.self) {
            _ = try await state.putChallenge([1], appId: Self.app, address: "", now: 0, expiresAt: 10, maxPerAddress: 0)
        }
        await #expect(throws: IssuerStateError.self, "not addressFull") {
            _ = try await state.putChallenge([1], appId: Self.app, address: "x", now: 0, expiresAt: 10, maxPerAddress: 3)
        }
        await #expect(throws: IssuerStateError.self) { _ = try await state.acceptCounter([1], appId: Self.app, counter: 1) }
        #expect(throws: IssuerStateError.self) { _ = try RedisIssuerState(url: "http://x", keyPrefix: "x:", logSink: LogSink(fd: 2, level: .error)) }
    }
}

extension AttestedKey {
    func withCounter(_ c: UInt32, window: UInt64) -> AttestedKey {
        var k = self
        k.counter = c
        k.counterWindow = window
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
        try await IssuerStateTests.exerciseCounterWindow(b)
        try await IssuerStateTests.exerciseChallengeCaps(a)
        try await IssuerStateTests.raceCounters([a, b], key: 1)

        // Many keys, spread over the masters: each inserted once, and 20 racing assertions per key win once.
        let keys = (10..<40).map { IssuerStateTests.key(UInt8($0)) }
        for k in keys {
            #expect(try await a.insertKey(k) == true)
            #expect(try await b.insertKey(k) == false)
        }
        let (wins, errors) = await withTaskGroup(of: Result<CounterVerdict, any Error>.self) { group in
            for k in keys {
                for i in 0..<20 {
                    let store = i % 2 == 0 ? a : b
                    group.addTask { await Result { try await store.acceptCounter(k.keyId, appId: IssuerStateTests.app, counter: 1) } }
                }
            }
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
        #expect(wins == keys.count, "one win per key, \(keys.count) keys")
        let owners = try Set(cluster.nodes.map { try $0.cli(["DBSIZE"]) })
        #expect(owners.count > 1 || !owners.contains("0"), "the keys spread over the masters")

        // One master gone: operations on its slots throw (503 at the API), none answers "yes".
        let victim = cluster.nodes[2]
        victim.stop()
        var failures = 0, wrongYes = 0
        for k in keys {
            do {
                if try await a.acceptCounter(k.keyId, appId: IssuerStateTests.app, counter: 2) == .accepted {
                    // Keys on the live masters still accept a counter, once.
                    if try await b.acceptCounter(k.keyId, appId: IssuerStateTests.app, counter: 2) != .repeated { wrongYes += 1 }
                }
            } catch {
                failures += 1
            }
        }
        #expect(failures > 0, "some keys live on the stopped master")
        #expect(wrongYes == 0)
    }
}
