import Dispatch
import EventLoop
import Foundation
import Glibc
import JSONLog
import Synchronization
import TestSupport
import Testing
@testable import Gateway
@testable import ReplayStores


/// docs/replay.md, last paragraph (hardening #7): single use holds across a store losing its state. Tokens are
/// modelled by (replay key, issuedAt = iat - clock_skew).
@Suite(.serialized) struct ReplayStateLossTests {
    /// The memory store knows nothing before it was created: a token minted before that is refused as
    /// reused even on its first use here (a previous process may have accepted it); later tokens pass once.
    @Test func memoryStoreRefusesTokensMintedBeforeItStarted() throws {
        let t = try ReplayTestLoop()
        defer { t.stop() }
        let store = MemoryReplayStore()
        let client = store.makeClient(for: t.loop)
        let before = store.stateSince - 0.001
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey(), issuedAt: before) == .reused)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey(), issuedAt: store.stateSince - 3600) == .reused)
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k, issuedAt: store.stateSince) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k, issuedAt: store.stateSince) == .reused)
        #expect(store.counters.reused == 3 && store.counters.consumed == 1)
    }

    /// Redis restarted without persistence on the same port: it forgot every key. A token consumed before,
    /// and a token minted before but never used, are refused as reused; a token minted after the gateway saw
    /// the server come back is accepted once.
    @Test func redisRestartWithoutPersistence() throws {
        let server = try RedisServerProcess(persistent: false)
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let (s, c) = try ReplayRedis.connect(server, t)
        defer { s.close() }
        let minted = Date().timeIntervalSince1970
        let used = ReplayTest.randomKey(), unused = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .consumed)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .reused)

        server.stop()
        try server.start()
        #expect(try server.cli(["EXISTS", ReplayRedis.keyName("appcheck:replay:", used)]) == "0") // forgotten
        #expect(ReplayRedis.waitForAnswers(c, t))
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .reused)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: unused, issuedAt: minted) == .reused)
        let after = Date().timeIntervalSince1970
        let fresh = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: fresh, issuedAt: after) == .consumed)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: fresh, issuedAt: after) == .reused)
    }

    /// FLUSHALL without a restart (same run_id, same connection): caught atomically by the missing group
    /// marker on the very next consume of that group; a token minted after that is accepted once.
    @Test func redisFlushAllWithoutRestart() throws {
        let server = try RedisServerProcess(persistent: false)
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let (s, c) = try ReplayRedis.connect(server, t)
        defer { s.close() }
        let minted = Date().timeIntervalSince1970
        let used = ReplayTest.randomKey(), unused = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .consumed)
        #expect(try server.cli(["FLUSHALL"]) == "OK")
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .reused)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: unused, issuedAt: minted) == .reused)
        // Also FLUSHDB of our database alone.
        #expect(try server.cli(["FLUSHDB"]) == "OK")
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .reused)
        let after = Date().timeIntervalSince1970
        let fresh = ReplayRedis.sameGroup(as: used)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: fresh, issuedAt: after) == .consumed)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: fresh, issuedAt: after) == .reused)
        #expect(s.counters.errors == 0)
    }

    /// A restart that kept its data (AOF) still changes run_id: tokens minted before the restart are refused
    /// (the server may have come back from an older snapshot), tokens minted after pass once. Without the
    /// run_id check the never-used old token would pass, since its group's marker survived.
    @Test func redisRestartWithPersistenceIsCaughtByRunID() throws {
        let server = try RedisServerProcess(persistent: true)
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let (s, c) = try ReplayRedis.connect(server, t)
        defer { s.close() }
        let minted = Date().timeIntervalSince1970
        let used = ReplayTest.randomKey(), unused = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .consumed)
        let markerBefore = try server.cli(["GET", "appcheck:replay:{" + replayHex([unused[0]]) + "}since"])
        #expect(!markerBefore.isEmpty)
        server.stop()
        try server.start()
        #expect(try server.cli(["EXISTS", ReplayRedis.keyName("appcheck:replay:", used)]) == "1")
        #expect(ReplayRedis.waitForAnswers(c, t))
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: used, issuedAt: minted) == .reused)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: unused, issuedAt: minted) == .reused)
        let after = Date().timeIntervalSince1970
        let fresh = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: fresh, issuedAt: after) == .consumed)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: fresh, issuedAt: after) == .reused)
    }

    /// Two gateways on one Redis: the second starts after a FLUSHALL that the first never saw, and both
    /// refuse the old tokens (the markers live in Redis, not in either process).
    @Test func aGatewayStartedAfterTheLossRefusesOldTokensToo() throws {
        let server = try RedisServerProcess(persistent: false)
        let t1 = try ReplayTestLoop("a"), t2 = try ReplayTestLoop("b")
        defer { t1.stop(); t2.stop(); server.stop() }
        let (s1, c1) = try ReplayRedis.connect(server, t1)
        defer { s1.close() }
        let minted = Date().timeIntervalSince1970
        let used = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c1, on: t1.loop, key: used, issuedAt: minted) == .consumed)
        #expect(try server.cli(["FLUSHALL"]) == "OK")
        let (s2, c2) = try ReplayRedis.connect(server, t2)
        defer { s2.close() }
        #expect(ReplayTest.consumeOne(c2, on: t2.loop, key: used, issuedAt: minted) == .reused)
        #expect(ReplayTest.consumeOne(c1, on: t1.loop, key: used, issuedAt: minted) == .reused)
    }
}

/// The same through the gateway: real tokens from a local issuer, real HTTP.
@Suite(.serialized) struct ReplayStateLossEndToEndTests {
    /// A token minted (and perhaps used) before this gateway process started is refused as reused by the
    /// memory store; one minted after is accepted once. Redis restarted without persistence: the token used
    /// before is refused, not accepted a second time.
    @Test(arguments: [ReplayStoreKind.memory, .redis])
    func tokensFromBeforeTheStoreCameBackAreRefused(_ kind: ReplayStoreKind) throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(kind)
        defer { backend.stop(); issuer.stop() }
        let early = try ReplayE2E.limited(issuer)
        ReplayE2E.waitForNextSecond()
        let h = try ReplayE2E.harness(issuer, backend)
        defer { h.stop() }
        if kind == .memory {
            #expect(try ReplayE2E.send(port: h.port, token: early).isReused)
        }
        let used = try ReplayE2E.limited(issuer)
        #expect(try ReplayE2E.send(port: h.port, token: used).status == 200)
        if let redis = backend.redis {
            redis.stop()
            try redis.start()
            #expect(ReplayE2E.eventually(20) { ReplayE2E.readyStatus(adminPort: h.adminPort) == 200 })
            #expect(ReplayE2E.eventually(10) { try ReplayE2E.send(port: h.port, token: used).isReused })
            #expect(try redis.cli(["FLUSHALL"]) == "OK")
            #expect(try ReplayE2E.send(port: h.port, token: used).isReused)
            // Every group's marker is back within a heartbeat: tokens minted from then on pass.
            #expect(ReplayE2E.eventually(10) { try redis.cli(["DBSIZE"]) == "256" })
            ReplayE2E.waitForNextSecond()
        }
        #expect(try ReplayE2E.send(port: h.port, token: used).isReused)
        let fresh = try ReplayE2E.limited(issuer)
        #expect(try ReplayE2E.send(port: h.port, token: fresh).status == 200)
        #expect(try ReplayE2E.send(port: h.port, token: fresh).isReused)
        #expect(h.upstream.requestCount == 2)
    }
}
