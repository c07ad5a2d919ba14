import ProxyCore
import EventLoop
import Glibc
import HTTPWire

/// One HTTP/1.1 connection to an upstream, owned by an `UpstreamPool`. While attached to a client
/// connection it carries that client's current request out and parses the response back (RFC 9112),
/// handing head and body to the client as they arrive.
///
/// Timeouts: `connect_timeout` while connecting; `response_timeout` from the moment the request is fully
/// sent until the response head arrives, and then between two reads of the response body; the server's
/// `idle_timeout` while idle in the pool.
///
/// Its lifecycle is `UpstreamConnectionStateMachine` (this class performs what it answers); the response's framing is
/// `ResponsePhase`.
final class UpstreamConnection: EventHandler {
    /// `upgradeHead`: the head of the answer to a WebSocket handshake (a `101` with `Upgrade: websocket` opens the
    /// tunnel; any other answer is an ordinary response, and the connection closes after it).
    enum ResponsePhase { case head, upgradeHead, length(remaining: Int64), chunked, untilClose, done }

    static let readSize = 64 * 1024

    let fd: Int32
    /// Strong: a pool retired by a reload must outlive the connections still finishing their exchange. The
    /// idle list (pool → connection) is emptied on retire and on close, which breaks the cycle.
    let pool: UpstreamPool
    var machine: UpstreamConnectionStateMachine
    let outBuf = IOBuffer(capacity: 2048)
    /// Unprocessed response bytes. While reading it is usually the loop's shared scratch buffer (`LoopBuffers.lent`); only
    /// bytes left over after processing (a partial head, body held back for a slow client) move into `ownBuf`.
    private(set) var inBuf: IOBuffer
    private let ownBuf = IOBuffer(capacity: 0)
    private var parser: HTTPResponseHeadParser
    private var decoder: ChunkedDecoder
    private var phase = ResponsePhase.done
    var client: UpstreamOwner?
    private var method = "GET"
    /// Its action (set at the end of `init`) captures the connection unowned, not weak (no side table, so retains of
    /// the connection stay on the fast path): `close()` cancels the timer and nothing arms it once closed. A `let`, not
    /// a `lazy var`: each read of a lazy one cost a retain and a release.
    private let timer = LoopTimer()
    /// `connect_timeout`, `response_timeout` and `stream_idle_timeout` as a value (ProxyCore): this connection feeds
    /// it events and performs its actions (`perform`), and keeps no deadline of its own.
    private var deadlines: UpstreamDeadlines
    /// The route's `stream_idle_timeout` in nanoseconds for the current exchange, 0 when it sets none: once the
    /// response head has arrived it replaces `response_timeout` between body reads, and request body bytes sent
    /// count as movement too (one idle bound over both directions). Set after `attach`, which clears it.
    var streamIdleTimeout: UInt64 {
        get { deadlines.streamIdle }
        set { deadlines.streamIdle = newValue }
    }

    /// TLS to an `https://` upstream; the handshake runs once TCP is connected (state `connecting` until done).
    let tls: TLSStream?

    init(fd: Int32, pool: UpstreamPool, connected: Bool, tls: TLSStream?) {
        self.fd = fd
        self.pool = pool
        self.tls = tls
        machine = UpstreamConnectionStateMachine(connected: connected, tls: tls != nil)
        deadlines = UpstreamDeadlines(limits: .init(connect: .nanoseconds(pool.settings.connectTimeout),
                                                    response: .nanoseconds(pool.settings.responseTimeout)))
        inBuf = ownBuf
        let limits = pool.context.runtime.upstreamParserLimits
        parser = HTTPResponseHeadParser(limits: limits)
        decoder = ChunkedDecoder(limits: limits)
        timer.action = { [unowned self] in self.timerFired() }
    }

    /// A tunnel reads no more response heads: a new parser lets the old one's reused head storage (the `101`'s
    /// bytes and field ranges) go.
    func dropParserStorage() { parser = HTTPResponseHeadParser(limits: parser.limits) }

    /// True when an idle connection can take a new request.
    var isUsable: Bool { machine.isIdle && inBuf.isEmpty }

    /// `upgrade`: the request is a WebSocket handshake (a new connection, never pooled after).
    func attach(_ client: UpstreamOwner, method: String, reused: Bool, upgrade: Bool = false) {
        self.client = client
        self.method = method
        phase = upgrade ? .upgradeHead : .head
        parser.reset()
        let connecting = machine.attach(pooled: reused)
        perform(deadlines.attached(connecting: connecting, now: pool.context.loop.now))
    }

    func becomeIdle(until: UInt64) {
        machine.becameIdle()
        client = nil
        phase = .done
        outBuf.shrinkIfIdle(to: 2048)
        ownBuf.release()
        perform(deadlines.pooled(until: until))
    }

    // MARK: request side

    func send(_ bytes: [UInt8]) {
        outBuf.append(bytes)
        if machine.isActive { flushOut() }
    }

    func send(_ bytes: UnsafeRawBufferPointer) {
        outBuf.append(bytes)
        if deadlines.requestBytesCount { deadlines.requestProgressed(now: pool.context.loop.now) }
        if machine.isActive { flushOut() }
    }

    func sendChunk(_ data: UnsafeRawBufferPointer) {
        guard data.count > 0 else { return }
        outBuf.appendHex(data.count)
        outBuf.append(Self.crlf)
        outBuf.append(data)
        outBuf.append(Self.crlf)
        if deadlines.requestBytesCount { deadlines.requestProgressed(now: pool.context.loop.now) }
        if machine.isActive { flushOut() }
    }

    func sendLastChunk() {
        outBuf.append(Self.lastChunk)
        if machine.isActive { flushOut() }
    }

    private static let crlf: [UInt8] = [13, 10]
    private static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// The client has handed over the whole request: the response timeout starts.
    func requestComplete() {
        if machine.requestSent() { perform(deadlines.requestSent(now: pool.context.loop.now)) }
    }

    /// The client no longer wants this exchange: the connection cannot be reused mid-exchange.
    func abandon() {
        client = nil
        close()
    }

    /// The client's send buffer drained: resume reading the response.
    func clientDrained() {
        guard machine.resumeReading() else { return }
        processResponse()
        if machine.readOwed { readResponse() }
    }

    @inline(__always)
    private func transportRead() -> IOResult {
        if let tls { return tls.read(into: inBuf, max: Self.readSize) }
        return Socket.read(fd, into: inBuf, max: Self.readSize)
    }

    private func flushOut() {
        guard !outBuf.isEmpty else { return }
        switch (tls.map { $0.write(from: outBuf) } ?? Socket.write(fd, from: outBuf)) {
        case .processed, .wouldBlock:
            if outBuf.readableCount <= Backpressure.lowWater { client?.upstreamDrained() }
        case .eof, .error:
            fail(machine.failure)
        }
    }

    // MARK: events

    func handleEvent(_ events: UInt32) {
        switch machine.state {
        case .closed: return
        case .tunnel(let relay): relay.endpoint.upstreamEvent(events); return
        case .connecting, .active, .idle: break
        }
        if case .connecting(let stage) = machine.state {
            if stage == .tcp {
                guard events & (EventLoop.writable | EventLoop.error | EventLoop.hangup) != 0 else { return }
                if Socket.pendingError(fd) != 0 || events & EventLoop.error != 0 {
                    fail(.connectRefused)
                    return
                }
                machine.tcpConnected(tls: tls != nil)
            }
            if let tls {
                switch tls.handshake() {
                case .done: break
                case .wantRead, .wantWrite: return
                case .failed: fail(.tlsFailed); return
                }
            }
            perform(deadlines.connected(requestSent: machine.connected(), now: pool.context.loop.now))
            flushOut()
            if machine.isClosed { return }
            if tls != nil { readResponse(); return }
        }
        let hangup = events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0
        // TLS records can need the other direction: on any event, try both.
        if tls != nil || hangup || events & EventLoop.readable != 0 {
            if machine.socketEvent(hangup: hangup) { readResponse() }
        }
        if machine.isActive && (tls != nil || events & EventLoop.writable != 0) { flushOut() }
    }

    /// Reads go into the loop's scratch buffer when nothing is pending.
    private func borrowScratch() {
        guard inBuf.isEmpty, !pool.context.buffers.lent(inBuf), let scratch = pool.context.buffers.lendScratch() else { return }
        inBuf = scratch
    }

    /// Keeps only the leftover bytes in the connection's own buffer.
    private func returnScratch() {
        guard pool.context.buffers.lent(inBuf) else { return }
        if !inBuf.isEmpty && !machine.isClosed { ownBuf.append(inBuf.readable) }
        inBuf = ownBuf
        pool.context.buffers.returnScratch()
    }

    private func readResponse() {
        machine.readStarting()
        borrowScratch()
        defer { returnScratch() }
        while !machine.isClosed {
            if machine.readHeld { machine.readStopped(); return }
            switch transportRead() {
            case .processed(let n):
                if machine.isIdle {
                    // An idle connection must stay silent; anything else means it is unusable.
                    pool.remove(self)
                    close()
                    return
                }
                machine.responseBytes()
                processResponse()
                // A short read means drained, unless the peer also closed: then read on to the EOF, which
                // no further edge would announce. A tunnel opened by this read reads on its own.
                if n < Self.readSize && machine.peer == .open { return }
                if case .tunnel = machine.state { return }
            case .wouldBlock:
                return
            case .eof:
                endOfInput()
                return
            case .error:
                if machine.isIdle { pool.remove(self); close(); return }
                fail(machine.failure)
                return
            }
        }
    }

    private func endOfInput() {
        switch machine.state {
        case .idle:
            pool.remove(self)
            close()
        case .active, .connecting:
            if case .untilClose = phase {
                machine.responseDelimitedByClose()
                complete()
            } else {
                fail(machine.failure)
            }
        case .closed, .tunnel:
            break
        }
    }

    private func processResponse() {
        while machine.isActive, let client {
            switch phase {
            case .head, .upgradeHead:
                if inBuf.isEmpty { return }
                switch parser.parse(inBuf.readable) {
                case .needMore:
                    return
                case .failure:
                    fail(.badResponse)
                    return
                case .complete(let head, let consumed):
                    inBuf.consume(consumed)
                    // The parser reset itself on `.complete`.
                    if head.status < 200 {
                        // 1xx interim responses are not forwarded; 101 switches protocols, asked for only by a
                        // WebSocket handshake (UpstreamConnection+Tunnel.swift).
                        if head.status == 101 {
                            if case .upgradeHead = phase, WebSocketHandshake.upgradesToWebSocket(head),
                               client.upstreamUpgraded(head, connection: self) { return }
                            fail(.badResponse)
                            return
                        }
                        continue
                    }
                    let framing = head.framing(requestMethod: method)
                    if case .upgradeHead = phase { machine.responseHead(keepAlive: false) } else {
                        machine.responseHead(keepAlive: head.keepAlive)
                    }
                    perform(deadlines.responseHead(now: pool.context.loop.now))
                    let wantsBody = client.upstreamResponseHead(head, framing: framing)
                    switch framing {
                    case .none: complete(); return
                    case .contentLength(let n): phase = n == 0 ? .done : .length(remaining: n)
                        if n == 0 { complete(); return }
                    case .chunked: phase = .chunked; decoder.reset()
                    case .untilClose: phase = .untilClose; machine.responseDelimitedByClose()
                    }
                    // The client's buffers are full (an HTTP/2 stream or connection at its limit): read no body
                    // until it drains; what the last read brought stays in `inBuf`.
                    if !wantsBody { machine.pauseReading(); return }
                }
            case .length(let remaining):
                let available = inBuf.readableCount
                if available == 0 { return }
                let n = Int(min(Int64(available), remaining))
                let more = client.upstreamResponseBody(UnsafeRawBufferPointer(rebasing: inBuf.readable[0..<n]))
                inBuf.consume(n)
                deadlines.responseProgressed(now: pool.context.loop.now)
                if remaining - Int64(n) == 0 { phase = .done; complete(); return }
                phase = .length(remaining: remaining - Int64(n))
                if !more { machine.pauseReading(); return }
            case .chunked:
                if inBuf.isEmpty { return }
                var more = true
                let result = decoder.decode(inBuf.readable) { data in
                    if !client.upstreamResponseBody(data) { more = false }
                }
                deadlines.responseProgressed(now: pool.context.loop.now)
                switch result {
                case .consumed(let n):
                    inBuf.consume(n)
                    if !more { machine.pauseReading() }
                    return
                case .done(let n):
                    inBuf.consume(n)
                    phase = .done
                    complete()
                    return
                case .failure:
                    fail(.badResponse)
                    return
                }
            case .untilClose:
                if inBuf.isEmpty { return }
                let more = client.upstreamResponseBody(inBuf.readable)
                inBuf.consume(inBuf.readableCount)
                deadlines.responseProgressed(now: pool.context.loop.now)
                if !more { machine.pauseReading() }
                return
            case .done:
                return
            }
        }
    }

    /// The response is complete: back to the pool when reusable (before telling the client, so that a
    /// pipelined next request can take this very connection), else closed.
    private func complete() {
        let c = client
        client = nil
        deadlines.responseComplete()
        phase = .done
        if machine.responseComplete(buffersEmpty: outBuf.isEmpty && inBuf.isEmpty) {
            pool.release(self)
        } else {
            close()
        }
        c?.upstreamResponseEnd()
    }

    private func fail(_ kind: UpstreamFailure) {
        let c = client
        client = nil
        close()
        c?.upstreamFailed(kind)
    }

    // MARK: timers

    /// Performs what `deadlines` decided. The timer stays armed when a deadline is dropped or moved later (lazy:
    /// one that fires early is scheduled again at the current deadline, one that finds none does nothing), which
    /// spares the timer heap a removal and an insertion per request; `close()` cancels it.
    @inline(__always)
    private func perform(_ action: UpstreamDeadlines.Action) {
        switch action {
        case .none:
            return
        case .arm(let at):
            guard !machine.isClosed else { return }
            if !timer.isArmed || timer.deadline > at { pool.context.loop.schedule(timer, at: at) }
        case .fail(let kind):
            fail(kind)
        case .close:
            pool.remove(self)
            close()
        }
    }

    /// A tunnel has no deadline of the connection's own (the relay's idle bound rules).
    func disarmForTunnel() { deadlines.responseComplete() }

    private func timerFired() {
        guard !machine.isClosed else { return }
        perform(deadlines.fire(now: pool.context.loop.now))
    }

    func close() {
        let (closed, tcpUp) = machine.close()
        guard closed else { return }
        pool.context.loop.cancel(timer)
        pool.context.loop.deregister(fd)
        if let tls, tcpUp { tls.shutdown() }
        Socket.close(fd)
    }
}
