import AppCheck
import CSystemShims
import EventLoop
import Foundation
import Glibc
import HTTPWire

/// (`@unchecked Sendable` only so a reference can be handed to its own loop with `execute`.)
/// One event loop's listeners and client connections: it accepts, counts connections against `max_connections`
/// and `max_connections_per_address`, moves a connection to HTTP/2, applies reloads and drains. What a request
/// needs on its way (clock, runtime, pools, App Check step, metrics, log) is in its `LoopEnvironment`, which
/// connections get instead of the worker (with the worker as their `ConnectionTable`, where they report closing).
/// Touched only on its loop's thread; a request never leaves it.
final class Worker: @unchecked Sendable, ConnectionTable {
    let context: LoopEnvironment
    let shared: SharedState
    private var clients: [ObjectIdentifier: ClientConnection] = [:]
    private var h2Connections: [ObjectIdentifier: H2Connection] = [:]
    private var listeners: [Listener] = []
    /// The TLS context for new connections on TLS listeners; replaced on reload (SIGHUP re-reads the files).
    var tlsContext: TLSServerContext?
    /// Connections refused over `max_connections_per_address` since the last log line about them, and when that
    /// line was written (monotonic ns; 0 = never): at most one line per second per loop.
    private var perAddressRefusedUnlogged = 0
    private var perAddressLoggedAt: UInt64 = 0
    /// Samples memory once a second from the first connection on (`MemoryReclaimer`): a burst's peak is seen while
    /// it lasts (buffers grow between connection events: 2,000 zero-window streams on five connections were never
    /// sampled at their peak, so their 3 MiB never counted as a burst), and the trim does not depend on which close
    /// came last.
    private lazy var reclaimTimer = LoopTimer { [unowned self] in
        self.sampleMemory(connections: self.shared.openConnections.load(ordering: .relaxed))
    }

    /// Everything the loop's `LoopEnvironment` holds is handed over here: `builtins` and `ownKeys` (the issuer's),
    /// `keyProvider` (Firebase's key set) and `replayClient` (the replay store's client for this loop).
    init(loop: EventLoop, runtime: Runtime, shared: SharedState, logSink: LogSink, builtins: [BuiltinHandler] = [],
         ownKeys: JWKSet? = nil, keyProvider: KeyRefetching? = nil, replayClient: ReplayClient? = nil) {
        self.shared = shared
        context = LoopEnvironment(loop: loop, runtime: runtime, logSink: logSink, shared: shared, builtins: builtins,
                                  ownKeys: ownKeys, keyProvider: keyProvider, replayClient: replayClient)
    }

    var loop: EventLoop { context.loop }
    var runtime: Runtime { context.runtime }
    var logSink: LogSink { context.logSink }
    var draining: Bool { context.draining }
    var replayClient: ReplayClient? { context.appCheck.replayClient }

    /// The replay store a reload added: this loop's client of it.
    func attachReplayClient(_ client: ReplayClient) { context.attachReplayClient(client) }
    var metrics: LoopMetrics {
        get {
            context.recorder.foldRouteSlots()
            return context.recorder.metrics
        }
        set { context.recorder.metrics = newValue }
    }

    /// A new key set for this loop; requests waiting on an unknown `kid` verify again.
    func setKeys(_ keys: LoopKeys) { context.setKeys(keys) }

    func setTrustedKeys(_ keys: LoopKeys, index: Int) { context.setTrustedKeys(keys, index: index) }

    var connectionCount: Int { clients.count }

    // MARK: listeners and connections

    func addListener(fd: Int32, secure: Bool = false) throws {
        let l = Listener(fd: fd, worker: self, secure: secure)
        try loop.register(fd, l, interest: EventLoop.readable)
        listeners.append(l)
    }

    /// A new client connection: it takes a slot of its address (`max_connections_per_address`, which trusted
    /// proxies are exempt from) and one of `max_connections`; every way it ends gives both back once (`release`).
    func accepted(fd: Int32, peer: SocketAddress, secure: Bool) {
        let key = ConnectionAddressKey(peer)
        let perAddress = runtime.maxConnectionsPerAddress
        let bound = perAddress > 0 && !runtime.isTrusted(peer) ? perAddress : 0
        guard shared.connectionsPerAddress.acquire(key, limit: bound) else {
            // Over its share: closed at once, not a byte written (a 503 would only feed the flood).
            Socket.close(fd)
            refusedPerAddress(key, limit: perAddress)
            return
        }
        let limit = runtime.settings.server.limits.maxConnections
        let open = shared.openConnections.add(1, ordering: .relaxed).newValue
        if open > limit {
            release(peer)
            refuseOverloaded(fd)
            return
        }
        sampleMemory(connections: open)
        Socket.setNoDelay(fd)
        var transport = Transport.plain
        if secure {
            guard let context = tlsContext, let stream = try? context.makeStream(fd: fd) else {
                release(peer)
                Socket.close(fd)
                return
            }
            transport = .tls(stream)
        }
        let conn = ClientConnection(fd: fd, peer: peer, context: context, connections: self, transport: transport)
        do { try loop.register(fd, conn) } catch {
            release(peer)
            Socket.close(fd)
            return
        }
        clients[ObjectIdentifier(conn)] = conn
        conn.start()
    }

    /// Gives back what an accepted connection from `peer` held: its `max_connections` slot and its address's.
    private func release(_ peer: SocketAddress) {
        let open = shared.openConnections.subtract(1, ordering: .relaxed).newValue
        shared.connectionsPerAddress.release(ConnectionAddressKey(peer))
        sampleMemory(connections: open)
    }

    /// Feeds `SharedState.reclaimer` where connections come and go; trims the heap after a burst.
    private func sampleMemory(connections: Int) {
        let buffers = IOBuffer.heldBytes + shared.h2BufferedResponseBytes.load(ordering: .relaxed)
            + shared.builtinBodyBytes.current
        if shared.reclaimer.sample(bufferBytes: buffers, connections: connections) {
            context.scheduleMemoryTrim()
        }
        if !reclaimTimer.isArmed { loop.schedule(reclaimTimer, at: loop.now + 1_000_000_000) }
    }

    /// Counts a connection closed over `max_connections_per_address`; logs at most once per second on this loop,
    /// with how many were refused since the last line.
    private func refusedPerAddress(_ key: ConnectionAddressKey, limit: Int) {
        context.recorder.metrics.connectionsRefused["per_address", default: 0] += 1
        perAddressRefusedUnlogged += 1
        let now = CSystemShims_monotonic_ns()
        guard perAddressLoggedAt == 0 || now &- perAddressLoggedAt >= 1_000_000_000 else { return }
        logSink.warning("connections refused: too many from one address", [
            ("address", .string(key.description)), ("max_connections_per_address", .int(limit)),
            ("refused", .int(perAddressRefusedUnlogged)),
        ])
        perAddressLoggedAt = now
        perAddressRefusedUnlogged = 0
    }

    /// Over `max_connections`: a best-effort 503 and close, without reading the request.
    private func refuseOverloaded(_ fd: Int32) {
        let out = IOBuffer(capacity: 512)
        ErrorResponse.write(into: out, status: 503, code: "overloaded", reason: "max_connections",
                            requestId: context.recorder.newRequestId(), close: true, retryAfter: 1, headOnly: false)
        _ = Socket.write(fd, from: out)
        Socket.close(fd)
    }

    /// A connection negotiated HTTP/2 (ALPN `h2`, or the h2c preface): the same socket continues as an
    /// `H2Connection`, counted once in `max_connections`.
    func handOver(_ conn: ClientConnection, initial: UnsafeRawBufferPointer) {
        guard clients.removeValue(forKey: ObjectIdentifier(conn)) != nil else { return }
        let h2 = H2Connection(fd: conn.fd, peer: conn.peer, context: context, connections: self, transport: conn.transport)
        h2Connections[ObjectIdentifier(h2)] = h2
        loop.replaceHandler(conn.fd, h2)
        if context.draining { h2.drain() }
        h2.start(initial: initial, peerHungUp: conn.peerHungUp)
    }

    func h2ConnectionClosed(_ conn: H2Connection) {
        guard h2Connections.removeValue(forKey: ObjectIdentifier(conn)) != nil else { return }
        release(conn.peer)
    }

    func connectionClosed(_ conn: ClientConnection) {
        guard clients.removeValue(forKey: ObjectIdentifier(conn)) != nil else { return }
        release(conn.peer)
    }

    // MARK: reload and shutdown

    /// Switches to a new configuration generation; requests in flight finish on the old one.
    func apply(_ new: Runtime) { context.apply(new) }

    /// Stops accepting (closes this loop's listeners) and closes idle connections; busy ones close after
    /// their current response.
    func beginDrain() {
        context.beginDrain()
        for l in listeners { l.close() }
        listeners.removeAll()
        for c in Array(clients.values) { c.drain() }
        for c in Array(h2Connections.values) { c.drain() }
    }

    /// Drops every remaining connection (the grace period ran out).
    func forceClose() {
        for c in Array(clients.values) { c.abort() }
        for c in Array(h2Connections.values) { c.abort() }
        context.pools.retireAll()
    }

    // MARK: logs and counters

    /// A copy of this loop's counters, with the connection gauges filled in (called on the loop thread).
    func snapshotMetrics() -> LoopMetrics {
        context.recorder.foldRouteSlots()
        var m = context.recorder.metrics
        for c in clients.values {
            if c.isTunnel {
                m.connectionsActive += 1
                m.connectionsTunnel += 1
            } else if c.exchange != nil { m.connectionsActive += 1 } else { m.connectionsIdle += 1 }
        }
        for c in h2Connections.values { if c.isActive { m.connectionsActive += 1 } else { m.connectionsIdle += 1 } }
        return m
    }

}

/// Server-wide counters shared by all loops (touched on accept and close only, never per request).
final class SharedState: Sendable {
    let openConnections = Atomic<Int>(0)
    /// Open connections per client address (`max_connections_per_address`).
    let connectionsPerAddress = ConnectionsPerAddress()
    /// Streams reset by clients, per address and in all (HTTP/2 Rapid Reset across reconnects).
    let resetBudget = ClientResetBudget(now: CSystemShims_monotonic_ns())
    /// HTTP/2 response bytes buffered in the process, waiting for clients' flow-control windows or sockets
    /// (`gateway_h2_buffered_response_bytes`; bounded by `H2Connection.processBufferLimit`).
    let h2BufferedResponseBytes = Atomic<Int>(0)
    /// Set once `h2BufferedResponseBytes` passed `H2Connection.trimHighWater`; cleared (and the heap trimmed) when
    /// it is back under `trimLowWater`.
    let h2BufferedWasHigh = Atomic<Bool>(false)
    /// Request bodies built-in handlers (the issuer) hold in the process (`gateway_builtin_buffered_body_bytes`):
    /// past `BuiltinBodyBudget.limit`, new such requests are answered 503 at once (docs/issuer.md, Limits).
    let builtinBodyBytes = BufferGauge(limit: BuiltinBodyBudget.limit, trimHighWater: 4 << 20)
    /// The same bytes per client address: each holds at most `BuiltinBodyBudget.perAddress` (issue 39).
    let builtinBodyShares = BuiltinBodyShares()
    /// Trims the heap after a burst of connections or buffered bytes (`MemoryReclaimer`).
    let reclaimer = MemoryReclaimer()
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

    /// The 128 random bits of a new id (written as 32 hex digits by `RequestID`).
    mutating func nextBits() -> (UInt64, UInt64) { (next64(), next64()) }

    mutating func next() -> String { Self.string(nextBits()) }

    /// The 32 lower-case hex digits of `bits`, high nibble first.
    static func string(_ bits: (UInt64, UInt64)) -> String {
        // Written straight into the string's storage: no table or scratch array per request.
        String(unsafeUninitializedCapacity: 32) { out in
            guard let base = out.baseAddress, out.count >= 32 else { return 0 }
            write(bits, to: base)
            return 32
        }
    }

    /// The same 32 digits appended to `out` in place: no string per request.
    static func append(_ bits: (UInt64, UInt64), to out: IOBuffer) {
        out.reserve(32)
        write(bits, to: out.writable.baseAddress!.assumingMemoryBound(to: UInt8.self))
        out.didWrite(32)
    }

    /// The same 32 digits written at `p` (32 bytes).
    @inline(__always)
    static func write(_ bits: (UInt64, UInt64), to p: UnsafeMutablePointer<UInt8>) {
        let raw = UnsafeMutableRawPointer(p)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.0 >> 32)), toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.0)), toByteOffset: 8, as: UInt64.self)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.1 >> 32)), toByteOffset: 16, as: UInt64.self)
        raw.storeBytes(of: hexWord(UInt32(truncatingIfNeeded: bits.1)), toByteOffset: 24, as: UInt64.self)
    }

    /// The 8 lower-case hex digits of `x`, high nibble first, as the bytes of a word to store (eight digits in a
    /// dozen word operations instead of a table look-up, a shift and a store per digit: two ids per request).
    @inline(__always)
    static func hexWord(_ x: UInt32) -> UInt64 {
        // Nibble k of `x` (k = 0 the lowest) into the low half of byte k.
        var v = UInt64(x)
        v = (v | v << 16) & 0x0000_FFFF_0000_FFFF
        v = (v | v << 8) & 0x00FF_00FF_00FF_00FF
        v = (v | v << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // Each byte n (0...15) to ASCII: `0` + n, plus 39 more (to `a`) where n >= 10, i.e. where n + 6 reaches 16.
        // No byte carries into the next: every intermediate byte stays below 0x80.
        let letters = ((v &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        let ascii = v &+ 0x3030_3030_3030_3030 &+ letters &* 39
        // Byte 0 (the lowest nibble) must land last in memory.
        return ascii.byteSwapped.littleEndian
    }
}
