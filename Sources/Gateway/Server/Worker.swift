import AppCheck
import CSystemShims
import EventLoop
import Foundation
import Glibc
import HTTPWire

/// (`@unchecked Sendable` only so a reference can be handed to its own loop with `execute`.)
/// Everything one event loop owns: its listeners, client connections, upstream pools, App Check step and
/// log buffer. Touched only on its loop's thread; a request never leaves it.
final class Worker: @unchecked Sendable {
    let loop: EventLoop
    let shared: SharedState
    let logSink: LogSink
    private(set) var runtime: Runtime
    private var pools: [UpstreamPool] = []
    private var clients: [ObjectIdentifier: ClientConnection] = [:]
    private var h2Connections: [ObjectIdentifier: H2Connection] = [:]
    private var listeners: [Listener] = []
    private(set) var appCheck: AppCheckStep!
    /// This loop's view of the key set; replaced through `setKeys`.
    private(set) var keys: LoopKeys?
    var keyProvider: KeyRefetching?
    /// The gateway's own issuer's public keys (docs/issuer.md), a second key set beside Firebase's; nil without
    /// `issuer:`. Fixed at start.
    var ownKeys: JWKSet?
    /// Requests the gateway answers itself (the issuer's API), matched before routes.
    var builtins: [BuiltinHandler] = []
    var replayClient: ReplayClient?
    /// The TLS context for new connections on TLS listeners; replaced on reload (SIGHUP re-reads the files).
    var tlsContext: TLSServerContext?
    var metrics = LoopMetrics()
    private(set) var draining = false
    private var logBuffer = IOBuffer(capacity: 16 * 1024)
    /// The read buffer client connections borrow while reading (one loop reads one socket at a time).
    let scratch = IOBuffer(capacity: 64 * 1024)
    /// A shared, always-empty buffer standing in for a connection's input when nothing is pending.
    /// Never written to: a connection swaps in `scratch` or a buffer of its own before appending.
    let emptyBuffer = IOBuffer(capacity: IOBuffer.releasedCapacity)
    private var random: RequestIdGenerator
    private var clock = WallClockCache()

    init(loop: EventLoop, runtime: Runtime, shared: SharedState, logSink: LogSink) {
        self.loop = loop
        self.runtime = runtime
        self.shared = shared
        self.logSink = logSink
        random = RequestIdGenerator()
        pools = makePools(runtime)
        appCheck = AppCheckStep(worker: self, cacheCapacity: runtime.settings.appCheck.tokenCacheSize / max(1, runtime.settings.server.threads))
        loop.afterBatch.append { [unowned self] in self.flushLog() }
    }

    private func makePools(_ runtime: Runtime) -> [UpstreamPool] {
        runtime.settings.upstreams.enumerated().map { i, u in
            UpstreamPool(settings: u, addresses: runtime.upstreamAddresses[i], tls: runtime.upstreamTLS[i], worker: self)
        }
    }

    func pool(for index: Int) -> UpstreamPool { pools[index] }

    /// A new key set for this loop; requests waiting on an unknown `kid` verify again.
    func setKeys(_ keys: LoopKeys) {
        self.keys = keys
        appCheck.keysChanged()
    }

    var connectionCount: Int { clients.count }

    // MARK: listeners and connections

    func addListener(fd: Int32, secure: Bool = false) throws {
        let l = Listener(fd: fd, worker: self, secure: secure)
        try loop.register(fd, l, interest: EventLoop.readable)
        listeners.append(l)
    }

    func accepted(fd: Int32, peer: SocketAddress, secure: Bool) {
        let limit = runtime.settings.server.limits.maxConnections
        if shared.openConnections.add(1, ordering: .relaxed).newValue > limit {
            shared.openConnections.subtract(1, ordering: .relaxed)
            refuseOverloaded(fd)
            return
        }
        Socket.setNoDelay(fd)
        var transport = ClientConnection.Transport.plain
        if secure {
            guard let context = tlsContext, let stream = try? context.makeStream(fd: fd) else {
                shared.openConnections.subtract(1, ordering: .relaxed)
                Socket.close(fd)
                return
            }
            transport = .tls(stream)
        }
        let conn = ClientConnection(fd: fd, peer: peer, worker: self, transport: transport)
        do { try loop.register(fd, conn) } catch {
            shared.openConnections.subtract(1, ordering: .relaxed)
            Socket.close(fd)
            return
        }
        clients[ObjectIdentifier(conn)] = conn
        conn.registered = true
        conn.start()
    }

    /// Over `max_connections`: a best-effort 503 and close, without reading the request.
    private func refuseOverloaded(_ fd: Int32) {
        let out = IOBuffer(capacity: 512)
        ErrorResponse.write(into: out, status: 503, code: "overloaded", reason: "max_connections",
                            requestId: newRequestId(), close: true, retryAfter: 1, headOnly: false)
        _ = Socket.write(fd, from: out)
        Socket.close(fd)
    }

    /// A connection negotiated HTTP/2 (ALPN `h2`, or the h2c preface): the same socket continues as an
    /// `H2Connection`, counted once in `max_connections`.
    func handOver(_ conn: ClientConnection, initial: UnsafeRawBufferPointer) {
        guard conn.registered else { return }
        conn.registered = false
        clients.removeValue(forKey: ObjectIdentifier(conn))
        let h2 = H2Connection(fd: conn.fd, peer: conn.peer, worker: self, transport: conn.transport)
        h2.registered = true
        h2Connections[ObjectIdentifier(h2)] = h2
        loop.replaceHandler(conn.fd, h2)
        if draining { h2.drain() }
        h2.start(initial: initial)
    }

    func h2ConnectionClosed(_ conn: H2Connection) {
        guard conn.registered else { return }
        conn.registered = false
        h2Connections.removeValue(forKey: ObjectIdentifier(conn))
        shared.openConnections.subtract(1, ordering: .relaxed)
    }

    func countH2ProtocolClose(_ reason: String) {
        metrics.h2ConnectionErrors[reason, default: 0] += 1
    }

    func connectionClosed(_ conn: ClientConnection) {
        guard conn.registered else { return }
        conn.registered = false
        clients.removeValue(forKey: ObjectIdentifier(conn))
        shared.openConnections.subtract(1, ordering: .relaxed)
    }

    // MARK: reload and shutdown

    /// Switches to a new configuration generation; requests in flight finish on the old one.
    func apply(_ new: Runtime) {
        let old = runtime
        runtime = new
        var newPools: [UpstreamPool] = []
        for (i, u) in new.settings.upstreams.enumerated() {
            if let j = old.settings.upstreams.firstIndex(where: { $0.name == u.name }),
               sameEndpoint(old.settings.upstreams[j], u), j < pools.count, pools[j].addresses.count == new.upstreamAddresses[i].count {
                newPools.append(pools[j])
            } else {
                newPools.append(UpstreamPool(settings: u, addresses: new.upstreamAddresses[i], tls: new.upstreamTLS[i],
                                             worker: self))
            }
        }
        for p in pools where !newPools.contains(where: { $0 === p }) { p.retire() }
        pools = newPools
    }

    private func sameEndpoint(_ a: UpstreamSettings, _ b: UpstreamSettings) -> Bool {
        a.scheme == b.scheme && a.host == b.host && a.port == b.port && a.basePath == b.basePath
            && a.connectTimeout == b.connectTimeout && a.responseTimeout == b.responseTimeout
            && a.maxIdleConnections == b.maxIdleConnections && a.caFile == b.caFile
    }

    /// Stops accepting (closes this loop's listeners) and closes idle connections; busy ones close after
    /// their current response.
    func beginDrain() {
        draining = true
        for l in listeners { l.close() }
        listeners.removeAll()
        for c in Array(clients.values) { c.drain() }
        for c in Array(h2Connections.values) { c.drain() }
    }

    /// Drops every remaining connection (the grace period ran out).
    func forceClose() {
        for c in Array(clients.values) { c.abort() }
        for c in Array(h2Connections.values) { c.abort() }
        for p in pools { p.retire() }
    }

    // MARK: request ids

    /// The client's `X-Request-Id` when it is valid (1–128 of `A–Z a–z 0–9 - _ . :`), else a new one.
    func requestId(from headers: HTTPHeaders) -> String {
        if let i = headers.firstIndex(forLowercased: "x-request-id") {
            let ok = headers.withValueBytes(at: i) { v -> Bool in
                guard v.count >= 1 && v.count <= 128 else { return false }
                for b in v {
                    switch b {
                    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                         UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                         UInt8(ascii: "."), UInt8(ascii: ":"):
                        continue
                    default:
                        return false
                    }
                }
                return true
            }
            if ok { return headers.value(at: i) }
        }
        return newRequestId()
    }

    func newRequestId() -> String { random.next() }

    // MARK: logs and counters

    /// A copy of this loop's counters, with the connection gauges filled in (called on the loop thread).
    func snapshotMetrics() -> LoopMetrics {
        var m = metrics
        for c in clients.values { if c.exchange != nil { m.connectionsActive += 1 } else { m.connectionsIdle += 1 } }
        for c in h2Connections.values { if c.isActive { m.connectionsActive += 1 } else { m.connectionsIdle += 1 } }
        return m
    }

    /// Counts and logs one finished request.
    func record(_ ex: Exchange) {
        let status = ex.status
        let seconds = Double(loop.refreshNow() &- ex.start) / 1e9
        if !ex.routeName.isEmpty {
            // In place through the dictionary's modify accessor: no copy of the counters per request.
            Self.count(&metrics.routes[ex.routeName, default: LoopMetrics.Route(mode: ex.mode)], ex, status: status,
                       seconds: seconds)
            if ex.appCheckRan {
                metrics.dashboard.record(route: ex.routeName, mode: ex.mode, outcome: ex.appCheck.outcome,
                                         reason: ex.appCheck.reason, appId: ex.appCheck.appId)
            }
        } else {
            metrics.unroutedStatuses[status, default: 0] += 1
        }
        accessLog(ex, status: status)
    }

    private static func count(_ r: inout LoopMetrics.Route, _ ex: Exchange, status: Int, seconds: Double) {
        r.mode = ex.mode
        if ex.appCheckRan, let i = LoopMetrics.outcomes.firstIndex(of: ex.appCheck.outcome) {
            r.outcomes[i] += 1
            if ex.appCheck.outcome != "verified" && ex.appCheck.outcome != "skipped", let reason = ex.appCheck.reason {
                r.rejections[reason, default: 0] += 1
            }
        }
        r.statuses[status, default: 0] += 1
        var b = 0
        while b < LoopMetrics.durationBuckets.count && seconds > LoopMetrics.durationBuckets[b] { b += 1 }
        if b < r.buckets.count { r.buckets[b] += 1 }
        r.durationSum += seconds
        r.durationCount += 1
    }

    func countTLSHandshakeFailure() { metrics.tlsHandshakeFailures += 1 }

    func countUpstreamError(_ ex: Exchange, _ kind: UpstreamFailure) {
        metrics.upstreamErrors[.init(upstream: ex.pool?.settings.name ?? "", kind: kind.rawValue), default: 0] += 1
        if logSink.enabled(.warning) {
            var line = JSONLine()
            line.begin(time: Date(), severity: .warning)
            line.field("message", "upstream error")
            line.field("request_id", ex.requestId)
            line.field("route", ex.routeName)
            line.field("upstream", ex.pool?.settings.name ?? "")
            line.field("kind", kind.rawValue)
            line.end()
            line.bytes.withUnsafeBytes { logBuffer.append($0) }
        }
    }

    /// One access-log line per request (docs/operations.md). Never the query, the token, cookies or credentials.
    private func accessLog(_ ex: Exchange, status: Int) {
        guard logSink.enabled(.info) else { return }
        let now = loop.refreshNow()
        var line = JSONLine()
        line.bytes.append(contentsOf: "{\"time\":\"".utf8)
        line.bytes.append(contentsOf: clock.timestamp().utf8)
        line.bytes.append(contentsOf: "\",\"severity\":\"INFO\",\"message\":\"request\"".utf8)
        line.bytes.append(UInt8(ascii: ","))
        line.resumeAfterSeparator()
        line.field("request_id", ex.requestId)
        line.field("route", ex.routeName.isEmpty ? nil : ex.routeName)
        line.field("method", ex.method)
        line.field("path", ex.path)
        line.field("status", status)
        line.field("duration_ms", milliseconds: Double(now &- ex.start) / 1e6)
        if ex.upstreamStart != 0 && ex.upstreamEnd >= ex.upstreamStart {
            line.field("upstream_ms", milliseconds: Double(ex.upstreamEnd - ex.upstreamStart) / 1e6)
        } else {
            line.field("upstream_ms", raw: "null")
        }
        let ac = ex.appCheck
        line.field("outcome", ex.appCheckRan ? ac.outcome : nil)
        line.field("reason", ac.reason)
        line.field("app_id", ac.appId)
        let app: String
        switch ac.status {
        case "verified": app = "VALID"
        case "missing": app = "MISSING"
        case "skipped": app = ac.tokenSHA256 == nil ? "MISSING" : "INVALID"
        default: app = "INVALID"
        }
        line.field("verifications", raw: "{\"app\":\"\(app)\"}")
        line.field("token_sha256", ac.tokenSHA256)
        line.end()
        line.bytes.withUnsafeBytes { logBuffer.append($0) }
        if !ex.logFields.isEmpty {
            // A built-in handler's own line (the issuer's: app_id, method, result, rule), tied by request_id.
            var own = JSONLine()
            own.begin(time: Date(), severity: .info)
            own.field("message", "\(ex.routeName) exchange")
            own.field("request_id", ex.requestId)
            for (name, value) in ex.logFields { own.field(name, value) }
            own.end()
            own.bytes.withUnsafeBytes { logBuffer.append($0) }
        }
        if logBuffer.readableCount > 64 * 1024 { flushLog() }
    }

    func flushLog() {
        guard !logBuffer.isEmpty else { return }
        logSink.write(logBuffer.readable)
        logBuffer.clear()
        logBuffer.shrinkIfIdle(to: 16 * 1024)
    }
}

/// Server-wide counters shared by all loops (touched on accept and close only, never per request).
final class SharedState: Sendable {
    let openConnections = Atomic<Int>(0)
}

import JSONLog
import ReplayStores
import Synchronization

/// Fast request ids: 32 lower-case hex characters from a per-loop xoshiro256** seeded by the system
/// generator. Unique, not secret.
struct RequestIdGenerator {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    init() {
        var g = SystemRandomNumberGenerator()
        s = (g.next(), g.next(), g.next(), g.next() | 1)
    }

    private mutating func next64() -> UInt64 {
        let result = ((s.1 &* 5) << 7 | (s.1 &* 5) >> 57) &* 9
        let t = s.1 << 17
        s.2 ^= s.0; s.3 ^= s.1; s.1 ^= s.2; s.0 ^= s.3; s.2 ^= t
        s.3 = s.3 << 45 | s.3 >> 19
        return result
    }

    mutating func next() -> String {
        var a = next64(), b = next64()
        // Written straight into the string's storage: no table or scratch array per request.
        return String(unsafeUninitializedCapacity: 32) { out in
            for i in 0..<16 { out[15 - i] = Self.hexDigit(a & 0xF); a >>= 4 }
            for i in 0..<16 { out[31 - i] = Self.hexDigit(b & 0xF); b >>= 4 }
            return 32
        }
    }

    @inline(__always)
    private static func hexDigit(_ v: UInt64) -> UInt8 {
        v < 10 ? UInt8(ascii: "0") &+ UInt8(v) : UInt8(ascii: "a") &+ UInt8(v - 10)
    }
}

/// The RFC 3339 timestamp of now, formatted once per second per loop.
struct WallClockCache {
    private var second: Int = -1
    private var prefix = ""

    mutating func timestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        if tv.tv_sec != second {
            second = tv.tv_sec
            let full = JSONLine.timestamp(Date(timeIntervalSince1970: Double(tv.tv_sec)))
            prefix = String(full.dropLast(4))  // "…:SS."
        }
        let ms = Int(tv.tv_usec / 1000)
        return prefix + (ms < 10 ? "00" : ms < 100 ? "0" : "") + String(ms) + "Z"
    }
}
