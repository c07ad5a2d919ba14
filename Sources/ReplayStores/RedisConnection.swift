import EventLoop
import Glibc
import JSONLog

/// What a Redis command got: the server's reply (which may be a Redis error such as `-MOVED`), or no reply
/// at all (timeout, connection lost, not connected, protocol error) with a short reason for logs.
public enum RedisReply: Sendable, Equatable {
    case value(RESP.Value)
    case failure(String)
}

/// Told about a connection's state changes, on its loop thread.
protocol RedisConnectionOwner: AnyObject {
    /// The handshake finished. Commands the owner sends from here go out before any command held while the
    /// connection was coming up (so state checks precede held traffic on the wire).
    func redisConnectionReady(_ connection: RedisConnection, runID: String)
    /// The connection went down (its pending commands already failed); it reconnects by itself.
    func redisConnectionDown(_ connection: RedisConnection, reason: String)
}

/// What every connection of one store shares: where and how to connect.
struct RedisConnectionSettings {
    var tls: TLSClientContext?
    var user: String?
    var password: String?
    var db: Int
    /// Per command: a command not answered in time fails, and the connection is dropped.
    var timeout: Double
    /// Connect + TLS + handshake, and an outstanding heartbeat.
    var connectTimeout: Double
    var heartbeatInterval: Double
    var logSink: LogSink
    var storeName = "redis"
}

/// One non-blocking connection to one Redis node (plain TCP or TLS), spoken on one event loop.
///
/// - Connect, then (TLS: the handshake with chain and host-name checks), then pipelined `AUTH [user] password`
///   when credentials are set, `SELECT db` when db ≠ 0, and `INFO server` (for the server's `run_id`, which
///   changes at every restart). An `AUTH` error is logged once per failure streak at error level with the
///   server's text (never the password).
/// - Commands are pipelined and answered FIFO. Commands given while the connection is coming up are held
///   and written once it is ready; while it waits to reconnect they fail at once ("disconnected").
/// - Every command must be answered within `timeout`; when one is not, or the connection breaks, or a reply is
///   malformed, the connection is dropped and ALL its pending commands fail. It reconnects after 100 ms
///   doubling to 5 s (reset once a handshake succeeds), rotating through `addresses`.
/// - Heartbeat: an idle connection sends `PING` every `heartbeatInterval`.
final class RedisConnection: EventHandler {
    enum State { case idle, connecting, tlsHandshake, handshaking, ready, backoff, closed }
    private enum Expect { case handshake(String), runID, heartbeat, op(UInt64) }

    static let readSize = 16 * 1024
    static let minBackoff = 0.1
    static let maxBackoff = 5.0

    let loop: EventLoop
    let node: RedisEndpoint.Node
    private(set) var addresses: [SocketAddress]
    let settings: RedisConnectionSettings
    weak var owner: RedisConnectionOwner?
    private(set) var state = State.idle
    /// The `run_id` of the server at the last handshake ("" before the first).
    private(set) var runID = ""
    private(set) var lastError: String?
    private var fd: Int32 = -1
    private var tlsStream: TLSStream?
    private let outBuf = IOBuffer(capacity: 1024)
    private let inBuf = IOBuffer(capacity: 1024)
    private var expect: [Expect] = []
    private var expectHead = 0
    private let ops = PendingOps<RedisReply>()
    /// Commands given while connecting: written when ready.
    private var held: [([[UInt8]], UInt64)] = []
    private var peerHungUp = false
    private var backoff = RedisConnection.minBackoff
    private var attempt = 0
    private var wasUp = false
    private var authFailureLogged = false
    private var connDeadline: UInt64 = 0
    private var reconnectAt: UInt64 = 0
    private var nextHeartbeat: UInt64 = 0
    private var timer: LoopTimer?

    init(loop: EventLoop, node: RedisEndpoint.Node, addresses: [SocketAddress], settings: RedisConnectionSettings) {
        self.loop = loop
        self.node = node
        self.addresses = addresses
        self.settings = settings
    }

    var isReady: Bool { state == .ready }
    var isClosed: Bool { state == .closed }

    // MARK: commands

    /// Sends one command; `completion` gets its reply exactly once, on the loop thread, within `timeout`.
    func execute(_ args: [[UInt8]], completion: @escaping (RedisReply) -> Void) {
        switch state {
        case .closed:
            completion(.failure("closed"))
        case .idle, .backoff:
            completion(.failure("disconnected\(lastError.map { ": \($0)" } ?? "")"))
        case .connecting, .tlsHandshake, .handshaking:
            let id = ops.add(deadline: loop.now + .nanoseconds(settings.timeout), completion: completion)
            held.append((args, id))
            armTimer()
        case .ready:
            let id = ops.add(deadline: loop.now + .nanoseconds(settings.timeout), completion: completion)
            expect.append(.op(id))
            RESP.encodeCommand(args, into: outBuf)
            flush()
            armTimer()
        }
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

    /// Replaces the addresses tried from the next reconnect on.
    func setAddresses(_ list: [SocketAddress]) {
        if !list.isEmpty { addresses = list }
    }

    private func connect() {
        reconnectAt = 0
        let address = addresses[attempt % addresses.count]
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
        connDeadline = loop.now + .nanoseconds(settings.connectTimeout)
        state = .connecting
        if result.connected { connected() }
        armTimer()
    }

    /// TCP is up: start TLS or the Redis handshake.
    private func connected() {
        if let tls = settings.tls {
            do {
                tlsStream = try tls.makeStream(fd: fd, serverName: node.host)
            } catch {
                drop("TLS: \(error)")
                return
            }
            state = .tlsHandshake
            advanceTLSHandshake()
        } else {
            startHandshake()
        }
    }

    private func advanceTLSHandshake() {
        guard let stream = tlsStream else { return }
        switch stream.handshake() {
        case .done:
            startHandshake()
        case .wantRead, .wantWrite:
            break
        case .failed(let message):
            logHandshakeFailure(message)
            drop(message)
        }
    }

    private func startHandshake() {
        state = .handshaking
        if let password = settings.password {
            if let user = settings.user {
                RESP.encodeCommand(["AUTH", user, password], into: outBuf)
            } else {
                RESP.encodeCommand(["AUTH", password], into: outBuf)
            }
            expect.append(.handshake("AUTH"))
        }
        if settings.db != 0 {
            RESP.encodeCommand(["SELECT", String(settings.db)], into: outBuf)
            expect.append(.handshake("SELECT"))
        }
        RESP.encodeCommand(["INFO", "server"], into: outBuf)
        expect.append(.runID)
        flush()
    }

    private func becameReady() {
        state = .ready
        connDeadline = 0
        backoff = Self.minBackoff
        authFailureLogged = false
        lastError = nil
        if !wasUp {
            wasUp = true
            settings.logSink.info("replay store connected", [("store", .string(settings.storeName)),
                                                             ("node", .string(node.description)), ("loop", .int(loop.index))])
        }
        nextHeartbeat = loop.now + .nanoseconds(settings.heartbeatInterval)
        owner?.redisConnectionReady(self, runID: runID)
        guard state == .ready else { return }
        let waiting = held
        held.removeAll()
        for (args, id) in waiting {
            expect.append(.op(id))
            RESP.encodeCommand(args, into: outBuf)
        }
        flush()
        armTimer()
    }

    private func drop(_ reason: String) {
        teardown(reason: reason, next: .backoff)
    }

    private func teardown(reason: String, next: State) {
        if fd >= 0 {
            loop.deregister(fd)
            Socket.close(fd)
            fd = -1
        }
        tlsStream = nil
        outBuf.clear()
        inBuf.clear()
        expect.removeAll(keepingCapacity: true)
        expectHead = 0
        held.removeAll()
        connDeadline = 0
        nextHeartbeat = 0
        lastError = reason
        let failed = ops.takeAll()
        if next == .closed {
            state = .closed
            reconnectAt = 0
            if let timer { loop.cancel(timer) }
        } else {
            scheduleReconnect(reason: reason)
        }
        for c in failed { c(.failure(reason)) }
        owner?.redisConnectionDown(self, reason: reason)
    }

    private func scheduleReconnect(reason: String) {
        state = .backoff
        lastError = reason
        let fields: [(String, LogValue)] = [("store", .string(settings.storeName)), ("node", .string(node.description)),
                                            ("loop", .int(loop.index)), ("error", .string(reason))]
        if wasUp {
            settings.logSink.warning("replay store connection lost", fields)
            wasUp = false
        } else {
            settings.logSink.debug("replay store connect failed", fields)
        }
        reconnectAt = loop.now + .nanoseconds(backoff)
        backoff = min(backoff * 2, Self.maxBackoff)
        armTimer()
    }

    private func logHandshakeFailure(_ reason: String) {
        guard !authFailureLogged else { return }
        authFailureLogged = true
        settings.logSink.error("replay store handshake failed", [("store", .string(settings.storeName)),
                                                                 ("node", .string(node.description)), ("error", .string(reason))])
    }

    // MARK: I/O

    func handleEvent(_ events: UInt32) {
        guard fd >= 0 else { return }
        if state == .connecting {
            guard events & (EventLoop.writable | EventLoop.error | EventLoop.hangup) != 0 else { return }
            let err = Socket.pendingError(fd)
            if err != 0 || events & EventLoop.error != 0 {
                drop("connect \(node): \(String(cString: strerror(err != 0 ? err : ECONNREFUSED)))")
                return
            }
            connected()
            if fd < 0 { return }
        }
        if state == .tlsHandshake {
            advanceTLSHandshake()
            if fd < 0 || state == .tlsHandshake { return }
        }
        if events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 { peerHungUp = true }
        // TLS may need to write while reading and the reverse: on any event retry both (TLSStream's rule).
        readReplies()
        if fd < 0 { return }
        flush()
    }

    private func ioRead() -> IOResult {
        if let tlsStream { return tlsStream.read(into: inBuf, max: Self.readSize) }
        return Socket.read(fd, into: inBuf, max: Self.readSize)
    }

    private func flush() {
        guard fd >= 0, state == .handshaking || state == .ready, !outBuf.isEmpty else { return }
        let result = tlsStream.map { $0.write(from: outBuf) } ?? Socket.write(fd, from: outBuf)
        switch result {
        case .processed, .wouldBlock:
            break
        case .eof:
            drop("connection closed")
        case .error(let e):
            drop("write: \(tlsStream?.lastError ?? String(cString: strerror(e)))")
        }
    }

    private func readReplies() {
        guard state == .handshaking || state == .ready else { return }
        while fd >= 0 {
            switch ioRead() {
            case .processed(let n):
                parseReplies()
                if fd < 0 { return }
                // A short read means drained, unless the peer also closed: then read on to the EOF, which no
                // further edge would announce. (TLS reads drain OpenSSL's buffer too: see TLSStream.)
                if n < Self.readSize && !peerHungUp { return }
            case .wouldBlock:
                return
            case .eof:
                drop("connection closed by redis")
                return
            case .error(let e):
                drop("read: \(tlsStream?.lastError ?? String(cString: strerror(e)))")
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
            if let c = ops.take(id) { c(.value(value)) }
            armTimer()
        case .handshake(let command):
            if case .error(let text) = value {
                let reason = "\(command) failed: \(text.prefix(200))"
                logHandshakeFailure(reason)
                drop(reason)
            }
        case .runID:
            if case .error(let text) = value { drop("INFO failed: \(text.prefix(200))"); return }
            guard let info = value.text, let id = Self.runID(fromInfo: info) else {
                drop("INFO server has no run_id")
                return
            }
            runID = id
            becameReady()
        case .heartbeat:
            if case .error(let text) = value { drop("PING failed: \(text.prefix(200))"); return }
            connDeadline = 0
            nextHeartbeat = loop.now + .nanoseconds(settings.heartbeatInterval)
            armTimer()
        }
    }

    /// The `run_id:` line of an `INFO server` reply.
    static func runID(fromInfo info: String) -> String? {
        for line in info.split(whereSeparator: \.isNewline) where line.hasPrefix("run_id:") {
            let id = line.dropFirst("run_id:".count)
            return id.isEmpty ? nil : String(id)
        }
        return nil
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
        case .connecting, .tlsHandshake, .handshaking, .ready:
            if let d = ops.nextDeadline, d <= now { drop("timeout"); return }
            if connDeadline != 0 && connDeadline <= now {
                drop(state == .ready ? "heartbeat timeout" : "connect timeout")
                return
            }
            if state == .ready, nextHeartbeat != 0, nextHeartbeat <= now {
                nextHeartbeat = 0
                RESP.encodeCommand(["PING"], into: outBuf)
                expect.append(.heartbeat)
                connDeadline = now + .nanoseconds(settings.connectTimeout)
                flush()
            }
        }
        armTimer()
    }
}
