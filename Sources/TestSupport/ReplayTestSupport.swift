import Dispatch
import EventLoop
import Foundation
import Glibc
import JSONLog
import ReplayStores
import Synchronization

// Shared helpers for the replay store tests (ReplayStoresTests and GatewayTests).

/// A running event loop owned by one test.
public final class ReplayTestLoop: Sendable {
    public let loop: EventLoop
    public init(_ name: String = "replay-test") throws {
        loop = try EventLoop()
        loop.startThread(name: name)
    }
    public func stop() { loop.stop() }
}

/// Results collected from loop threads.
public final class ReplayCollector: Sendable {
    public init() {}
    private let results = Mutex<[ReplayResult]>([])
    private let signal = DispatchSemaphore(value: 0)

    public func add(_ r: ReplayResult) {
        results.withLock { $0.append(r) }
        signal.signal()
    }

    /// Waits for `count` results, at most `seconds`; returns what arrived.
    public func wait(count: Int, seconds: Double = 5) -> [ReplayResult] {
        let deadline = DispatchTime.now() + seconds
        for _ in 0..<count {
            if signal.wait(timeout: deadline) == .timedOut { break }
        }
        return results.withLock { $0 }
    }
}

public enum ReplayTest {
    public static func key(_ tag: String) -> [UInt8] {
        // Deterministic 32-byte keys; the first byte varies with the tag so shards differ.
        var bytes = [UInt8](repeating: 0, count: 32)
        for (i, b) in tag.utf8.enumerated() { bytes[i % 32] = bytes[i % 32] &* 31 &+ b }
        var h: UInt8 = 7
        for b in tag.utf8 { h = h &* 33 &+ b }
        bytes[0] = h
        return bytes
    }

    public static func randomKey() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255) } }

    public static func later(_ seconds: Double = 60) -> Double { Date().timeIntervalSince1970 + seconds }

    /// Submits one consume per key on `loop` (all in one loop turn) and waits for every answer.
    /// `issuedAt` defaults to now (a token minted just now, after the store came up).
    public static func consume(_ client: ReplayClient, on loop: EventLoop, keys: [[UInt8]], expiresAt: Double,
                        issuedAt: Double? = nil, seconds: Double = 5) -> [ReplayResult] {
        let collector = ReplayCollector()
        let bound = LoopBound(client)
        let ks = keys
        loop.execute {
            let iat = issuedAt ?? Date().timeIntervalSince1970
            for k in ks { bound.value.consume(key: k, expiresAt: expiresAt, issuedAt: iat) { collector.add($0) } }
        }
        return collector.wait(count: keys.count, seconds: seconds)
    }

    public static func consumeOne(_ client: ReplayClient, on loop: EventLoop, key: [UInt8], expiresAt: Double = later(),
                           issuedAt: Double? = nil, seconds: Double = 5) -> ReplayResult? {
        consume(client, on: loop, keys: [key], expiresAt: expiresAt, issuedAt: issuedAt, seconds: seconds).first
    }

    /// Polls `condition` every 20 ms until it holds or `seconds` pass.
    public static func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    /// 50 consumes of one key from two loops at once.
    public static func race(_ clients: [(ReplayClient, EventLoop)], key: [UInt8], total: Int = 50) -> [ReplayResult] {
        let collector = ReplayCollector()
        let start = DispatchSemaphore(value: 0)
        for (i, (client, loop)) in clients.enumerated() {
            let bound = LoopBound(client)
            let n = total / clients.count + (i < total % clients.count ? 1 : 0)
            loop.execute {
                start.wait()
                for _ in 0..<n {
                    bound.value.consume(key: key, expiresAt: later(), issuedAt: Date().timeIntervalSince1970) { collector.add($0) }
                }
            }
        }
        for _ in clients { start.signal() }
        return collector.wait(count: total, seconds: 10)
    }

    public static func isUnavailable(_ r: ReplayResult?) -> Bool {
        if case .unavailable = r { return true }
        return false
    }
}

/// Helpers for the Redis tests.
public enum ReplayRedis {
    /// The Redis key of replay key `k` under `prefix` (see `RedisReplayStore`).
    public static func keyName(_ prefix: String, _ k: [UInt8]) -> String { prefix + "{" + replayHex([k[0]]) + "}" + replayHex(k) }

    /// A store on `server` and one client on `t`, connected.
    public static func connect(_ server: RedisServerProcess, _ t: ReplayTestLoop, url: String? = nil, timeout: Double = 0.5,
                        heartbeat: Double = 0.5) throws -> (RedisReplayStore, ReplayClient) {
        let s = try RedisReplayStore(url: url ?? server.url, keyPrefix: "appcheck:replay:", timeout: timeout,
                                     logSink: LogSink(fd: 2, level: .error), heartbeatInterval: heartbeat)
        let c = s.makeClient(for: t.loop)
        guard ReplayTest.eventually(10, { s.readinessProblem() == nil }) else {
            s.close()
            throw HarnessError("redis store not ready: \(s.readinessProblem() ?? "")")
        }
        return (s, c)
    }

    /// A key in the same marker group as `k` (same first byte).
    public static func sameGroup(as k: [UInt8]) -> [UInt8] {
        var n = ReplayTest.randomKey()
        n[0] = k[0]
        return n
    }

    /// One consume per key, submitted in one loop turn; answers in key order (a cluster answers out of order).
    public static func consumeInOrder(_ client: ReplayClient, on loop: EventLoop, keys: [[UInt8]], issuedAt: Double? = nil,
                               seconds: Double = 10) -> [ReplayResult?] {
        let answers = Mutex<[ReplayResult?]>(Array(repeating: nil, count: keys.count))
        let signal = DispatchSemaphore(value: 0)
        let bound = LoopBound(client)
        let ks = keys
        let iat = issuedAt ?? Date().timeIntervalSince1970
        let expires = ReplayTest.later()
        loop.execute {
            for (i, k) in ks.enumerated() {
                bound.value.consume(key: k, expiresAt: expires, issuedAt: iat) { r in
                    answers.withLock { $0[i] = r }
                    signal.signal()
                }
            }
        }
        let deadline = DispatchTime.now() + seconds
        for _ in keys { if signal.wait(timeout: deadline) == .timedOut { break } }
        return answers.withLock { $0 }
    }

    /// Waits until the client answers again after an outage (a fresh key consumed), at most `seconds`.
    public static func waitForAnswers(_ c: ReplayClient, _ t: ReplayTestLoop, seconds: Double = 15) -> Bool {
        ReplayTest.eventually(seconds) {
            ReplayTest.consumeOne(c, on: t.loop, key: ReplayTest.randomKey(), issuedAt: .infinity) == .consumed
        }
    }
}
