import EventLoop
import Glibc
import JSONLog
import Synchronization

/// `replay.store: redis` — shared by any number of gateway instances (SPEC §5, §9).
///
/// - One non-blocking connection per event loop, spoken on that loop (RESP over our own sockets): each
///   `RedisReplayClient` owns its connection. Commands are pipelined and answers matched FIFO.
/// - On connect: `AUTH [user] password` when the URL has credentials, `SELECT db` when db ≠ 0, then `PING`;
///   the connection counts as up once the `PING` is answered. Operations submitted while the handshake is
///   under way are queued behind it on the same socket.
/// - Consume: `SET <prefix><hex key> 1 NX PXAT <ms>` (Redis ≥ 6.2, Valkey): `+OK` = consumed, null =
///   reused, anything else = unavailable.
/// - Timeout: each operation must be answered within `timeout`. When one is not, or the connection breaks, or
///   a reply is malformed, the connection is dropped and ALL its pending operations answer `.unavailable`;
///   it reconnects after a backoff of 100 ms doubling to 5 s (reset once a handshake succeeds). While waiting
///   to reconnect, `consume` fails fast with `.unavailable("disconnected")` instead of queueing.
/// - Heartbeat: an idle connection sends `PING` every `heartbeatInterval`, so a hung server or half-open
///   connection is noticed (and readiness reflects it) without traffic.
/// - Readiness: problem unless every loop's connection is up; a store with no loop clients yet reports
///   "no connection yet" (the gateway creates its clients at start, and it is not ready before they connect).
/// - The host name is resolved once, when the store is created (off the loops); every reconnect rotates
///   through the resolved addresses.
public final class RedisReplayStore: ReplayStore, @unchecked Sendable {
    let endpoint: RedisEndpoint
    let addresses: [SocketAddress]
    let keyPrefix: [UInt8]
    let timeout: Double
    let connectTimeout: Double
    let heartbeatInterval: Double
    let logSink: LogSink
    public let counters = ReplayCounters()
    private let closed = Atomic<Bool>(false)

    struct ClientStatus {
        var client: LoopBound<RedisReplayClient>
        var up: Bool
        var lastError: String?
    }
    private let registry = Mutex<[ClientStatus]>([])

    public convenience init(url: String, keyPrefix: String, timeout: Double, logSink: LogSink) throws {
        try self.init(url: url, keyPrefix: keyPrefix, timeout: timeout, logSink: logSink, heartbeatInterval: 2)
    }

    init(url: String, keyPrefix: String, timeout: Double, logSink: LogSink, heartbeatInterval: Double) throws {
        endpoint = try RedisEndpoint.parse(url)
        do {
            addresses = try SocketAddress.resolve(host: endpoint.host, port: endpoint.port)
        } catch {
            throw ReplayStoreError("replay.redis_url: cannot resolve \(endpoint.host): \(error)")
        }
        guard !addresses.isEmpty else { throw ReplayStoreError("replay.redis_url: no address for \(endpoint.host)") }
        self.keyPrefix = Array(keyPrefix.utf8)
        self.timeout = timeout
        connectTimeout = max(timeout, 1)
        self.heartbeatInterval = heartbeatInterval
        self.logSink = logSink
    }

    public func makeClient(for loop: EventLoop) -> ReplayClient {
        let client = RedisReplayClient(store: self, loop: loop)
        let bound = LoopBound(value: client)
        registry.withLock { $0.append(ClientStatus(client: bound, up: false, lastError: nil)) }
        if closed.load(ordering: .relaxed) {
            loop.execute { bound.value.shutdown() }
        } else {
            loop.execute { bound.value.start() }
        }
        return client
    }

    public func readinessProblem() -> String? {
        if closed.load(ordering: .relaxed) { return "redis: closed" }
        return registry.withLock { list -> String? in
            if list.isEmpty { return "redis: no connection yet" }
            let down = list.filter { !$0.up }
            if down.isEmpty { return nil }
            let why = down.compactMap { $0.lastError }.first.map { ": \($0)" } ?? ""
            return "redis: \(down.count) of \(list.count) connections down\(why)"
        }
    }

    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        let list = registry.withLock { list -> [ClientStatus] in
            let all = list
            list.removeAll()
            return all
        }
        for s in list {
            let c = s.client
            c.value.loop.execute { c.value.shutdown() }
        }
    }

    var isClosed: Bool { closed.load(ordering: .relaxed) }

    func setStatus(_ client: RedisReplayClient, up: Bool, error: String?) {
        registry.withLock { list in
            if let i = list.firstIndex(where: { $0.client.value === client }) {
                list[i].up = up
                if let error { list[i].lastError = error } else if up { list[i].lastError = nil }
            }
        }
    }
}

/// One loop's Redis connection. Everything here runs on `loop`'s thread.
final class RedisReplayClient: ReplayClient, EventHandler {
    enum State { case idle, connecting, handshaking, ready, backoff, closed }
    enum Expect { case auth, select, ping, heartbeat, op(UInt64) }

    static let readSize = 16 * 1024
    static let minBackoff = 0.1
    static let maxBackoff = 5.0

    /// Strong: the store's registry holds its clients until `close()`, which breaks the cycle.
    let store: RedisReplayStore
    let loop: EventLoop
    private(set) var state = State.idle
    private var fd: Int32 = -1
    private let outBuf = IOBuffer(capacity: 1024)
    private let inBuf = IOBuffer(capacity: 1024)
    private var expect: [Expect] = []
    private var expectHead = 0
    private let ops = PendingOps()
    private var peerHungUp = false
    private var backoff = RedisReplayClient.minBackoff
    private var attempt = 0
    private var wasUp = false
    /// Deadline for connect + handshake, or for an outstanding heartbeat (0 = none).
    private var connDeadline: UInt64 = 0
    private var reconnectAt: UInt64 = 0
    private var nextHeartbeat: UInt64 = 0
    private var timer: LoopTimer?

    init(store: RedisReplayStore, loop: EventLoop) {
        self.store = store
        self.loop = loop
    }

    // MARK: ReplayClient

    func consume(key: [UInt8], expiresAt: Double, completion: @escaping (ReplayResult) -> Void) {
        switch state {
        case .closed:
            complete(completion, .unavailable("closed"))
            return
        case .idle, .backoff:
            complete(completion, .unavailable("disconnected"))
            return
        case .connecting, .handshaking, .ready:
            break
        }
        guard key.count == 32, expiresAt.isFinite, expiresAt > 0 else {
            complete(completion, .unavailable("bad key"))
            return
        }
        let ms = Int(min((expiresAt * 1000).rounded(.up), 9_000_000_000_000_000))
        let id = ops.add(deadline: loop.now + .nanoseconds(store.timeout), completion: completion)
        expect.append(.op(id))
        var name = store.keyPrefix
        name.append(contentsOf: replayHex(key).utf8)
        RESP.encodeCommand([Array("SET".utf8), name, [UInt8(ascii: "1")], Array("NX".utf8), Array("PXAT".utf8),
                            Array(String(ms).utf8)], into: outBuf)
        if state != .connecting { flush() }
        armTimer()
    }

    // MARK: lifecycle

    func start() {
        guard state == .idle else { return }
        connect()
    }

    func shutdown() {
        guard state != .closed else { return }
        teardown(reason: "closed", next: .closed)
    }

    private func connect() {
        guard !store.isClosed else { shutdown(); return }
        reconnectAt = 0
        let address = store.addresses[attempt % store.addresses.count]
        attempt += 1
        let result: (fd: Int32, connected: Bool)
        do {
            result = try Socket.connect(address)
        } catch {
            scheduleReconnect(reason: "connect \(address): \(error)")
            return
        }
        fd = result.fd
        do {
            try loop.register(fd, self)
        } catch {
            Socket.close(fd)
            fd = -1
            scheduleReconnect(reason: "register: \(error)")
            return
        }
        Socket.setNoDelay(fd)
        peerHungUp = false
        state = result.connected ? .handshaking : .connecting
        connDeadline = loop.now + .nanoseconds(store.connectTimeout)
        let ep = store.endpoint
        if let password = ep.password {
            if let user = ep.user {
                RESP.encodeCommand(["AUTH", user, password], into: outBuf)
            } else {
                RESP.encodeCommand(["AUTH", password], into: outBuf)
            }
            expect.append(.auth)
        }
        if ep.db != 0 {
            RESP.encodeCommand(["SELECT", String(ep.db)], into: outBuf)
            expect.append(.select)
        }
        RESP.encodeCommand(["PING"], into: outBuf)
        expect.append(.ping)
        if state == .handshaking { flush() }
        armTimer()
    }

    /// Drops the connection: fails every pending operation with `reason`, then waits to reconnect.
    private func drop(_ reason: String) {
        teardown(reason: reason, next: .backoff)
    }

    private func teardown(reason: String, next: State) {
        if fd >= 0 {
            loop.deregister(fd)
            Socket.close(fd)
            fd = -1
        }
        outBuf.clear()
        inBuf.clear()
        expect.removeAll(keepingCapacity: true)
        expectHead = 0
        connDeadline = 0
        nextHeartbeat = 0
        let failed = ops.takeAll()
        if next == .closed {
            state = .closed
            reconnectAt = 0
            if let timer { loop.cancel(timer) }
            store.setStatus(self, up: false, error: reason)
        } else {
            state = .backoff
            scheduleReconnect(reason: reason)
        }
        for c in failed { complete(c, .unavailable(reason)) }
    }

    private func scheduleReconnect(reason: String) {
        state = .backoff
        if wasUp {
            store.logSink.warning("replay store connection lost", [("store", "redis"), ("loop", .int(loop.index)), ("error", .string(reason))])
            wasUp = false
        } else {
            store.logSink.debug("replay store connect failed", [("store", "redis"), ("loop", .int(loop.index)), ("error", .string(reason))])
        }
        store.setStatus(self, up: false, error: reason)
        reconnectAt = loop.now + .nanoseconds(backoff)
        backoff = min(backoff * 2, Self.maxBackoff)
        armTimer()
    }

    private func becameReady() {
        state = .ready
        connDeadline = 0
        backoff = Self.minBackoff
        if !wasUp {
            wasUp = true
            store.logSink.info("replay store connected", [("store", "redis"), ("loop", .int(loop.index))])
        }
        store.setStatus(self, up: true, error: nil)
        nextHeartbeat = loop.now + .nanoseconds(store.heartbeatInterval)
        armTimer()
    }

    // MARK: I/O

    func handleEvent(_ events: UInt32) {
        guard fd >= 0 else { return }
        if state == .connecting {
            guard events & (EventLoop.writable | EventLoop.error | EventLoop.hangup) != 0 else { return }
            let err = Socket.pendingError(fd)
            if err != 0 || events & EventLoop.error != 0 {
                drop("connect: \(String(cString: strerror(err != 0 ? err : ECONNREFUSED)))")
                return
            }
            state = .handshaking
            flush()
            if fd < 0 { return }
        }
        if events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 { peerHungUp = true }
        if events & (EventLoop.readable | EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 {
            readReplies()
            if fd < 0 { return }
        }
        if events & EventLoop.writable != 0 { flush() }
    }

    private func flush() {
        guard fd >= 0, state != .connecting, !outBuf.isEmpty else { return }
        switch Socket.write(fd, from: outBuf) {
        case .processed, .wouldBlock:
            break
        case .eof:
            drop("connection closed")
        case .error(let e):
            drop("write: \(String(cString: strerror(e)))")
        }
    }

    private func readReplies() {
        while fd >= 0 {
            switch Socket.read(fd, into: inBuf, max: Self.readSize) {
            case .processed(let n):
                parseReplies()
                if fd < 0 { return }
                // A short read means drained, unless the peer also closed: then read on to the EOF, which no
                // further edge would announce.
                if n < Self.readSize && !peerHungUp { return }
            case .wouldBlock:
                return
            case .eof:
                drop("connection closed by redis")
                return
            case .error(let e):
                drop("read: \(String(cString: strerror(e)))")
                return
            }
        }
    }

    private func parseReplies() {
        while fd >= 0 && !inBuf.isEmpty {
            switch RESP.parse(inBuf.readable) {
            case .needMore:
                return
            case .failure(let e):
                drop("protocol error: \(e)")
                return
            case .value(let value, let consumed):
                inBuf.consume(consumed)
                handleReply(value)
            }
        }
    }

    private func handleReply(_ value: RESP.Value) {
        guard expectHead < expect.count else {
            drop("protocol error: unexpected reply")
            return
        }
        let what = expect[expectHead]
        expectHead += 1
        if expectHead == expect.count {
            expect.removeAll(keepingCapacity: true)
            expectHead = 0
        } else if expectHead > 256 && expectHead * 2 > expect.count {
            expect.removeFirst(expectHead)
            expectHead = 0
        }
        switch what {
        case .op(let id):
            let result: ReplayResult
            switch value {
            case .simple("OK"): result = .consumed
            case .null: result = .reused
            case .error(let text): result = .unavailable("redis: \(text.prefix(200))")
            default: result = .unavailable("redis: unexpected reply to SET")
            }
            if let c = ops.take(id) { complete(c, result) }
            armTimer()
        case .auth, .select:
            if case .error(let text) = value {
                let reason = "\(what == .auth ? "AUTH" : "SELECT") failed: \(text.prefix(200))"
                store.logSink.error("replay store handshake failed", [("store", "redis"), ("error", .string(reason))])
                drop(reason)
            }
        case .ping:
            if case .error(let text) = value { drop("PING failed: \(text.prefix(200))"); return }
            becameReady()
        case .heartbeat:
            if case .error(let text) = value { drop("PING failed: \(text.prefix(200))"); return }
            connDeadline = 0
            nextHeartbeat = loop.now + .nanoseconds(store.heartbeatInterval)
            armTimer()
        }
    }

    // MARK: timers

    private func armTimer() {
        var next = UInt64.max
        if let d = ops.nextDeadline { next = min(next, d) }
        if connDeadline != 0 { next = min(next, connDeadline) }
        if reconnectAt != 0 { next = min(next, reconnectAt) }
        if nextHeartbeat != 0 { next = min(next, nextHeartbeat) }
        let t = timer ?? LoopTimer { [weak self] in self?.timerFired() }
        timer = t
        if next == UInt64.max {
            loop.cancel(t)
        } else if !t.isArmed || t.deadline != next {
            loop.schedule(t, at: next)
        }
    }

    private func timerFired() {
        let now = loop.now
        switch state {
        case .closed, .idle:
            return
        case .backoff:
            if reconnectAt != 0 && reconnectAt <= now { connect(); return }
        case .connecting, .handshaking, .ready:
            if let d = ops.nextDeadline, d <= now { drop("timeout"); return }
            if connDeadline != 0 && connDeadline <= now {
                drop(state == .ready ? "heartbeat timeout" : "connect timeout")
                return
            }
            if state == .ready, nextHeartbeat != 0, nextHeartbeat <= now {
                nextHeartbeat = 0
                RESP.encodeCommand(["PING"], into: outBuf)
                expect.append(.heartbeat)
                connDeadline = now + .nanoseconds(store.connectTimeout)
                flush()
            }
        }
        armTimer()
    }

    private func complete(_ c: (ReplayResult) -> Void, _ result: ReplayResult) {
        store.counters.record(result)
        c(result)
    }
}

extension RedisReplayClient.Expect: Equatable {}
