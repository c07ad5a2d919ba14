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

/// Hash slots: the Redis Cluster specification's examples.
@Suite struct RedisClusterSlotTests {
    @Test func specificationVectors() {
        #expect(RedisClusterSlot.crc16(Array("123456789".utf8)[...]) == 0x31C3)
        #expect(RedisClusterSlot.slot(of: "foo") == 12182)
        #expect(RedisClusterSlot.slot(of: "{user1000}.following") == RedisClusterSlot.slot(of: "{user1000}.followers"))
        #expect(RedisClusterSlot.slot(of: "{user1000}.following") == RedisClusterSlot.slot(of: "user1000"))
        // An empty tag hashes the whole key; only the first { … } pair counts.
        #expect(RedisClusterSlot.slot(of: "foo{}{bar}") == Int(RedisClusterSlot.crc16(Array("foo{}{bar}".utf8)[...]) & 0x3FFF))
        #expect(RedisClusterSlot.slot(of: "foo{{bar}}zap") == RedisClusterSlot.slot(of: "{bar"))
        #expect(RedisClusterSlot.slot(of: "foo{bar}{zap}") == RedisClusterSlot.slot(of: "bar"))
        #expect(RedisClusterSlot.slot(of: "{") == Int(RedisClusterSlot.crc16(Array("{".utf8)[...]) & 0x3FFF))
    }

    @Test func redirectionsParse() {
        let m = RedisClusterClient.Redirect("MOVED 3999 127.0.0.1:6381")
        #expect(m?.ask == false && m?.slot == 3999 && m?.node == RedisEndpoint.Node(host: "127.0.0.1", port: 6381))
        let a = RedisClusterClient.Redirect("ASK 12 [::1]:7000")
        #expect(a?.ask == true && a?.node == RedisEndpoint.Node(host: "::1", port: 7000))
        for bad in ["MOVED", "MOVED x 1.2.3.4:1", "MOVED 99999 h:1", "MOVED 1 h", "MOVED 1 :1", "ERR x y"] {
            #expect(RedisClusterClient.Redirect(bad) == nil, "\(bad)")
        }
    }
}

/// Replay keys on a real 3-master `redis-server --cluster-enabled yes` on loopback.
@Suite(.serialized) struct ReplayRedisClusterTests {
    static func keyIn(group: UInt8) -> [UInt8] {
        var k = ReplayTest.randomKey()
        k[0] = group
        return k
    }

    /// Routing by slot agrees with the servers, keys spread over all masters, single use holds; a slot moved
    /// (IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE) while a client keeps consuming keys of that slot
    /// several times each: no key is ever consumed twice, keys consumed before the move are still refused after
    /// it, and traffic follows ASK and MOVED to the new owner. Then a master is killed: its slots fail closed
    /// (never consumed), readiness says so; restarted without persistence, old tokens are refused (state loss)
    /// and new ones pass once.
    @Test func clusterRoutingMigrationAndNodeLoss() throws {
        let cluster = try RedisClusterProcess(count: 3)
        let t = try ReplayTestLoop()
        defer { t.stop(); cluster.stop() }
        let s = try RedisReplayStore(url: cluster.url, keyPrefix: "appcheck:replay:", timeout: 0.5,
                                     logSink: LogSink(fd: 2, level: .error), heartbeatInterval: 0.5)
        defer { s.close() }
        let c = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually(15) { s.readinessProblem() == nil }, "\(s.readinessProblem() ?? "")")

        // Our slot computation is the servers'.
        for name in ["foo", "{user1000}.following", ReplayRedis.keyName("appcheck:replay:", ReplayTest.randomKey()),
                     "appcheck:replay:{7f}since"] {
            #expect(try cluster.nodes[0].cli(["CLUSTER", "KEYSLOT", name]) == String(RedisClusterSlot.slot(of: name)), "\(name)")
        }

        let minted = Date().timeIntervalSince1970
        let keys = (0..<300).map { _ in ReplayTest.randomKey() }
        #expect(ReplayTest.consume(c, on: t.loop, keys: keys, expiresAt: ReplayTest.later(), issuedAt: minted)
                == Array(repeating: .consumed, count: 300))
        #expect(ReplayTest.consume(c, on: t.loop, keys: keys, expiresAt: ReplayTest.later(), issuedAt: minted)
                == Array(repeating: .reused, count: 300))
        for n in cluster.nodes { #expect((Int(try n.cli(["DBSIZE"])) ?? 0) > 50, "node \(n.port) holds keys") }

        // Slot migration under load.
        let group: UInt8 = 0x5a
        let slot = RedisClusterSlot.slot(of: "appcheck:replay:{5a}")
        let source = try cluster.owner(ofSlot: slot)
        let target = try #require(cluster.nodes.first { $0.port != source.port })
        let before = (0..<40).map { _ in Self.keyIn(group: group) }
        #expect(ReplayTest.consume(c, on: t.loop, keys: before, expiresAt: ReplayTest.later(), issuedAt: minted)
                == Array(repeating: .consumed, count: 40))
        let results = Mutex<[[UInt8]: [ReplayResult]]>([:])
        let stop = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        let box = UncheckedBox(value: c)
        Thread.detachNewThread {
            let c = box.value
            defer { done.signal() }
            var rounds = 0
            while !stop.load(ordering: .relaxed) && rounds < 2_000 {
                rounds += 1
                let batch = (0..<10).map { _ in Self.keyIn(group: group) }
                let tries = batch + before.shuffled().prefix(5) + batch + batch
                let got = ReplayRedis.consumeInOrder(c, on: t.loop, keys: tries, issuedAt: minted)
                results.withLock { map in
                    for (k, r) in zip(tries, got) { map[k, default: []].append(r ?? .unavailable("no answer")) }
                }
                usleep(2_000) // leave CPU to the migration and to other suites on a shared machine
            }
        }
        try cluster.migrate(slot: slot, to: target) { usleep(20_000) }
        #expect(cluster.waitUntilConsistent(timeout: 20))
        // Some more traffic after the move (MOVED to the new owner, then the refreshed map).
        usleep(300_000)
        stop.store(true, ordering: .relaxed)
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(try cluster.owner(ofSlot: slot).port == target.port)
        let seen = results.withLock { $0 }
        var doubles = 0, consumed = 0, unavailable = 0
        for (k, list) in seen {
            let n = list.filter { $0 == .consumed }.count
            if n > 1 || (n == 1 && before.contains(k)) { doubles += 1 }
            consumed += n
            unavailable += list.filter { ReplayTest.isUnavailable($0) }.count
        }
        #expect(doubles == 0, "keys accepted twice: \(doubles)")
        #expect(consumed > 0)
        var reasons: [String: Int] = [:]
        for list in seen.values { for r in list { if case .unavailable(let why) = r { reasons[String(why.prefix(40)), default: 0] += 1 } } }
        print("cluster migration: \(seen.count) keys, \(consumed) consumed, \(unavailable) unavailable answers \(reasons)")
        #expect(ReplayTest.consume(c, on: t.loop, keys: before, expiresAt: ReplayTest.later(), issuedAt: minted)
                == Array(repeating: .reused, count: 40))
        let after = (0..<20).map { _ in Self.keyIn(group: group) }
        #expect(ReplayRedis.consumeInOrder(c, on: t.loop, keys: after + after)
                == Array(repeating: .consumed, count: 20) + Array(repeating: .reused, count: 20))
        #expect(try target.cli(["DBSIZE"]) != "0")

        // A master dies: its slots fail closed, never consumed.
        let victim = try cluster.owner(ofSlot: RedisClusterSlot.slot(of: ReplayRedis.keyName("appcheck:replay:", keys[0])))
        let onVictim = keys.filter { try! cluster.owner(ofSlot: RedisClusterSlot.slot(of: ReplayRedis.keyName("appcheck:replay:", $0))).port == victim.port }
        #expect(!onVictim.isEmpty)
        victim.stop()
        #expect(ReplayTest.eventually(10) { s.readinessProblem() != nil })
        let during = ReplayTest.consume(c, on: t.loop, keys: onVictim, expiresAt: ReplayTest.later(), issuedAt: minted)
        #expect(during.count == onVictim.count && during.allSatisfy { $0 != .consumed }, "\(during.prefix(3))")
        #expect(during.contains { ReplayTest.isUnavailable($0) })
        // Back without its data (no persistence; nodes.conf keeps its slots): old tokens are refused.
        try victim.start()
        #expect(cluster.waitUntilConsistent(timeout: 30))
        #expect(ReplayTest.eventually(20) { s.readinessProblem() == nil }, "\(s.readinessProblem() ?? "")")
        let again = ReplayTest.consume(c, on: t.loop, keys: onVictim, expiresAt: ReplayTest.later(), issuedAt: minted)
        #expect(again == Array(repeating: .reused, count: onVictim.count), "\(again.prefix(3))")
        // Every group's marker is back (within a marker check): tokens minted from then on pass once.
        // A node that cannot be asked is an error, reported as such, never a count of 0.
        var last: Result<Int, any Error> = .success(0)
        let settled = ReplayTest.eventually(10) {
            last = Result { try Self.markerCount(cluster) }
            if case .success(256) = last { return true }
            return false
        }
        #expect(settled, "\(last)")
        usleep(2_000) // a token minted in a later millisecond than the newest marker
        let fresh = (0..<30).map { _ in ReplayTest.randomKey() }
        #expect(ReplayRedis.consumeInOrder(c, on: t.loop, keys: fresh + fresh)
                == Array(repeating: .consumed, count: 30) + Array(repeating: .reused, count: 30))
    }

    /// Group markers held across the cluster.
    static func markerCount(_ cluster: RedisClusterProcess) throws -> Int {
        try cluster.nodes.reduce(0) { sum, n in
            let reply = try n.cli(["EVAL", "return #redis.call('KEYS', ARGV[1])", "0", "appcheck:replay:*since"])
            guard let count = Int(reply) else { throw HarnessError("a node answered the marker count with \(reply)") }
            return sum + count
        }
    }

    /// No seed answers: never ready, every consume fails closed at once.
    @Test func noClusterFailsClosed() throws {
        let port = try RedisClusterProcess.freeClusterPort(excluding: [])
        let t = try ReplayTestLoop()
        defer { t.stop() }
        let s = try RedisReplayStore(url: "redis+cluster://127.0.0.1:\(port)", keyPrefix: "p:", timeout: 0.5,
                                     logSink: LogSink(fd: 2, level: .error), heartbeatInterval: 0.5)
        defer { s.close() }
        let c = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem()?.contains("down") == true }, "\(s.readinessProblem() ?? "")")
        #expect(ReplayTest.isUnavailable(ReplayTest.consumeOne(c, on: t.loop, key: ReplayTest.randomKey())))
    }
}

/// The gateway configured with `redis+cluster://`: limited-use tokens single-use through a real cluster, and 50
/// simultaneous uses of one token get one 200.
@Suite(.serialized) struct ReplayClusterEndToEndTests {
    @Test func gatewayOnACluster() throws {
        let cluster = try RedisClusterProcess(count: 3)
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(.memory)
        defer { backend.stop(); issuer.stop(); cluster.stop() }
        let h = try GatewayHarness {
            ReplayE2E.config(upstream: $0, issuer: issuer, backend: backend, threads: 2)
                .replacingOccurrences(of: "  store: memory", with: "  store: redis\n  redis_url: \(cluster.url)")
        }
        defer { h.stop() }
        try h.waitUntilReady(timeout: 20)
        ReplayE2E.waitForNextSecond()
        for _ in 0..<20 {
            let t = try ReplayE2E.limited(issuer)
            #expect(try ReplayE2E.send(port: h.port, token: t).status == 200)
            #expect(try ReplayE2E.send(port: h.port, token: t).isReused)
        }
        let answers = try ReplayE2E.race(ports: [h.port], token: try ReplayE2E.limited(issuer))
        #expect(answers.filter { $0.status == 200 }.count == 1, "\(answers)")
        #expect(answers.filter(\.isReused).count == 49, "\(answers)")
        #expect(h.upstream.requestCount == 21)
    }
}

/// `rediss+cluster://`: a cluster speaking TLS only (clients and bus), the test CA in `ca_file`; each node's
/// certificate is checked against the address CLUSTER SLOTS announces. With another CA: never ready.
@Suite(.serialized) struct ReplayTLSClusterTests {
    @Test func tlsCluster() throws {
        let pki = try TestPKI(extendedKeyUsage: "serverAuth,clientAuth") // nodes are TLS clients on the bus too
        let cluster = try RedisClusterProcess(count: 3, tls: .init(cert: pki.cert, key: pki.key, ca: pki.caCert))
        let t = try ReplayTestLoop()
        defer { t.stop(); cluster.stop() }
        #expect(cluster.url.hasPrefix("rediss+cluster://"))
        let s = try RedisReplayStore(url: cluster.url, keyPrefix: "appcheck:replay:", timeout: 0.5,
                                     logSink: LogSink(fd: 2, level: .error), heartbeatInterval: 0.5)
        defer { s.close() }
        let c = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually(15) { s.readinessProblem() == nil }, "\(s.readinessProblem() ?? "")")
        let keys = (0..<100).map { _ in ReplayTest.randomKey() }
        #expect(ReplayRedis.consumeInOrder(c, on: t.loop, keys: keys + keys)
                == Array(repeating: .consumed, count: 100) + Array(repeating: .reused, count: 100))
        for n in cluster.nodes { #expect((Int(try n.cli(["DBSIZE"])) ?? 0) > 10, "node \(n.port) holds keys") }

        let other = try TestPKI()
        let bad = try RedisReplayStore(url: cluster.url.replacingOccurrences(of: pki.caCert, with: other.caCert),
                                       keyPrefix: "appcheck:replay:", timeout: 0.5, logSink: LogSink(fd: 2, level: .error),
                                       heartbeatInterval: 0.5)
        defer { bad.close() }
        let bc = bad.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { bad.readinessProblem()?.contains("certificate verify failed") == true },
                "\(bad.readinessProblem() ?? "ready")")
        #expect(ReplayTest.isUnavailable(ReplayTest.consumeOne(bc, on: t.loop, key: ReplayTest.randomKey())))
    }
}
