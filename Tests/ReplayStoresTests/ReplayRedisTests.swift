import EventLoop
import Foundation
import Glibc
import JSONLog
import Testing
import TestSupport
@testable import ReplayStores

/// A real `redis-server` on a free loopback port, owned by one test.
final class RedisTestServer {
    let port: UInt16
    let password: String?
    private var process: Process?

    init(password: String? = nil) throws {
        let fd = try Socket.listen(SocketAddress(ip: "127.0.0.1", port: 0)!, reusePort: false)
        port = Socket.localAddress(fd)?.port ?? 0
        Socket.close(fd)
        self.password = password
        try start()
    }

    deinit { stop() }

    func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        var args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        if let password { args += ["--requirepass", password] }
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.runHoldingEnvironment()
        process = p
        guard ReplayTest.eventually(10, { (try? self.cli(["PING"])) == "PONG" }) else {
            throw ReplayStoreError("redis-server on port \(port) did not answer PING")
        }
    }

    func stop() {
        guard let p = process else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    func signal(_ sig: Int32) {
        if let p = process { kill(p.processIdentifier, sig) }
    }

    /// Runs `redis-cli` against this server and returns its trimmed output.
    func cli(_ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
        var all = ["-h", "127.0.0.1", "-p", String(port)]
        if let password { all += ["-a", password, "--no-auth-warning"] }
        p.arguments = all + args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.runHoldingEnvironment()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    var url: String {
        if let password { return "redis://:\(password)@127.0.0.1:\(port)/0" }
        return "redis://127.0.0.1:\(port)"
    }
}

@Suite(.serialized) struct ReplayRedisTests {
    let log = LogSink(fd: 2, level: .error)

    func store(_ server: RedisTestServer, url: String? = nil, prefix: String = "appcheck:replay:", timeout: Double = 0.25,
               heartbeat: Double = 2) throws -> RedisReplayStore {
        try RedisReplayStore(url: url ?? server.url, keyPrefix: prefix, timeout: timeout, logSink: log, heartbeatInterval: heartbeat)
    }

    @Test func consumedThenReusedWithKeyPrefix() throws {
        let server = try RedisTestServer()
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let s = try store(server, prefix: "test:rp:")
        defer { s.close() }
        let client = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem() == nil })
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
        let batch = ReplayTest.consume(client, on: t.loop, keys: [ReplayTest.randomKey(), k, ReplayTest.randomKey()],
                                       expiresAt: ReplayTest.later())
        #expect(batch == [.consumed, .reused, .consumed])
        // Replay keys `<prefix>{<first byte hex>}<64 hex>`, beside the 256 group markers `<prefix>{<g>}since`.
        let all = try server.cli(["keys", "*"]).split(separator: "\n").map(String.init)
        let keys = all.filter { !$0.hasSuffix("since") }
        #expect(keys.count == 3)
        #expect(all.count - keys.count == 256)
        #expect(keys.contains(ReplayRedis.keyName("test:rp:", k)))
        #expect(keys.allSatisfy { $0.hasPrefix("test:rp:{") && $0.count == "test:rp:{xx}".count + 64 })
        // Expiry is set from expiresAt (PXAT).
        let ttl = Int(try server.cli(["pttl", ReplayRedis.keyName("test:rp:", k)])) ?? -1
        #expect(ttl > 50_000 && ttl <= 60_000)
        #expect(s.counters.consumed == 3 && s.counters.reused == 2 && s.counters.errors == 0)
    }

    @Test func expiryFreesKeys() throws {
        let server = try RedisTestServer()
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let s = try store(server)
        defer { s.close() }
        let client = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem() == nil })
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k, expiresAt: ReplayTest.later(1)) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
        #expect(ReplayTest.eventually(5) { (try? server.cli(["dbsize"])) == "256" })
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
    }

    @Test func twoGatewaysShareOneRedisAndFiftyRacersGetOneConsumed() throws {
        let server = try RedisTestServer()
        let a = try ReplayTestLoop("a"), b = try ReplayTestLoop("b")
        defer { a.stop(); b.stop(); server.stop() }
        let s1 = try store(server), s2 = try store(server)
        defer { s1.close(); s2.close() }
        let c1 = s1.makeClient(for: a.loop), c2 = s2.makeClient(for: b.loop)
        #expect(ReplayTest.eventually { s1.readinessProblem() == nil && s2.readinessProblem() == nil })
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c1, on: a.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(c2, on: b.loop, key: k) == .reused)
        let results = ReplayTest.race([(c1, a.loop), (c2, b.loop)], key: ReplayTest.randomKey())
        #expect(results.count == 50)
        #expect(results.filter { $0 == .consumed }.count == 1)
        #expect(results.filter { $0 == .reused }.count == 49)
    }

    @Test func redisDownFailsClosedWithinTimeoutAndRecoversAfterRestart() throws {
        let server = try RedisTestServer()
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let s = try store(server, timeout: 0.25, heartbeat: 0.5)
        defer { s.close() }
        let client = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem() == nil })
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)

        // Hung server (SIGSTOP): the operation times out within `timeout`, never consumed.
        server.signal(SIGSTOP)
        // (`timeout`: the client gave up on its own deadline; Redis, stopped, never replies.)
        let hung = ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey())
        #expect(hung == .unavailable("timeout"))
        #expect(ReplayTest.eventually { s.readinessProblem() != nil })
        server.signal(SIGCONT)
        #expect(ReplayTest.eventually(10) { s.readinessProblem() == nil })
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)

        // Dead server: replays and new tokens alike are unavailable, quickly; never consumed.
        server.stop()
        for _ in 0..<5 {
            let r = ReplayTest.consumeOne(client, on: t.loop, key: k)
            #expect(ReplayTest.isUnavailable(r), "\(String(describing: r))")
            let fresh = ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey())
            #expect(ReplayTest.isUnavailable(fresh), "\(String(describing: fresh))")
        }
        #expect(ReplayTest.eventually { s.readinessProblem() != nil })
        #expect(s.counters.errors >= 10)

        // Restart on the same port: the same store reconnects by itself.
        try server.start()
        #expect(ReplayTest.eventually(10) { s.readinessProblem() == nil })
        let k2 = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k2) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k2) == .reused)
    }

    @Test func authenticatesWithPasswordAndSelectsDatabase() throws {
        let server = try RedisTestServer(password: "s3cret")
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let s = try store(server, url: "redis://:s3cret@127.0.0.1:\(server.port)/2")
        defer { s.close() }
        let client = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem() == nil })
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
        #expect(try server.cli(["-n", "2", "dbsize"]) == "257")
        #expect(try server.cli(["-n", "0", "dbsize"]) == "0")

        // With the user form too (the default user).
        let s2 = try store(server, url: "redis://default:s3cret@127.0.0.1:\(server.port)/2")
        defer { s2.close() }
        let c2 = s2.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s2.readinessProblem() == nil })
        #expect(ReplayTest.consumeOne(c2, on: t.loop, key: k) == .reused)
    }

    @Test func wrongPasswordIsNotReadyAndNeverConsumes() throws {
        let server = try RedisTestServer(password: "right")
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let s = try store(server, url: "redis://:wrong@127.0.0.1:\(server.port)")
        defer { s.close() }
        let client = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem()?.contains("AUTH failed") == true })
        for _ in 0..<5 {
            let r = ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey())
            #expect(ReplayTest.isUnavailable(r), "\(String(describing: r))")
        }
        #expect(try server.cli(["dbsize"]) == "0")
    }

    @Test func noServerAtAllFailsFastAndReportsNotReady() throws {
        let fd = try Socket.listen(SocketAddress(ip: "127.0.0.1", port: 0)!, reusePort: false)
        let port = Socket.localAddress(fd)?.port ?? 1
        Socket.close(fd)
        let t = try ReplayTestLoop()
        defer { t.stop() }
        var settings = ReplaySettings()
        settings.store = .redis
        settings.redisURL = "redis://127.0.0.1:\(port)"
        let s = try makeReplayStore(settings, logSink: log)
        defer { s.close() }
        #expect(s.readinessProblem() == "redis: no connection yet")
        let client = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem()?.contains("connections down") == true })
        #expect(ReplayTest.isUnavailable(ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey())))
    }
}
