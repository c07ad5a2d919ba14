import ProxyCore
import EventLoop
import Glibc
import HTTPWire

/// One HTTP/2 connection to an `h2` upstream (SPEC §6.1), owned by its pool's `H2UpstreamPool`: h2c with prior
/// knowledge on `http://`, TLS with ALPN `h2` on `https://`. It carries many exchanges at once, one stream each
/// (`H2UpstreamStream`, the exchange's `UpstreamChannel`), over an `H2ClientSession`.
///
/// Its lifecycle is `H2UpstreamConnectionState` (events in, actions out); this class owns the descriptor and performs
/// the actions. Timeouts: `connect_timeout` while connecting, the server's `idle_timeout` while it carries no stream;
/// each stream has its own response and idle bounds. Memory: the session reopens the connection window as DATA
/// arrives and each stream's window only once its client took the bytes, so a slow client holds at most its stream's
/// window (`streamWindow`) and never stalls the other streams.
final class H2UpstreamConnection: EventHandler, H2ClientSessionDelegate {
    /// The receive window of each upstream stream: the response bytes one slow client can make the gateway hold.
    static let streamWindow = 256 * 1024
    static let connectionWindow = 16 << 20
    static let readSize = 64 * 1024
    /// Session output is pulled into `outBuf` in slices of this size while the socket takes it.
    static let sendSlice = 64 * 1024

    let fd: Int32
    /// Strong, like `UpstreamConnection.pool`: a retired pool outlives the connections finishing their streams.
    let pool: UpstreamPool
    let tls: TLSStream?
    private(set) var machine: H2UpstreamConnectionState
    let session: H2ClientSession
    /// Streams with an id (their HEADERS submitted), by id.
    private var streams = StreamTable<H2UpstreamStream>()
    /// Streams that completed on this connection (a failure without any response byte on a connection that served
    /// others is `stale_connection`, retried once like HTTP/1.1's).
    private(set) var completedStreams = 0
    private let outBuf = IOBuffer(capacity: 16 * 1024)
    private let inBuf = IOBuffer(capacity: 0)
    /// Unowned: `closeSocket` cancels it, and nothing arms it after.
    private lazy var timer = LoopTimer { [unowned self] in self.timerFired() }
    private var deadline: UInt64 = 0

    var context: LoopEnvironment { pool.context }

    init(fd: Int32, pool: UpstreamPool, connected: Bool, tls: TLSStream?, assumedMaxConcurrent: Int) {
        machine = H2UpstreamConnectionState(assumedMaxConcurrent: assumedMaxConcurrent, tcpConnected: connected)
        self.fd = fd
        self.pool = pool
        self.tls = tls
        let limits = pool.context.runtime.upstreamParserLimits
        session = H2ClientSession(limits: H2Limits(
            initialWindowSize: Self.streamWindow, connectionWindowSize: Self.connectionWindow,
            maxHeaderListBytes: limits.maxHeadBytes, maxHeaders: limits.maxHeaders), delegate: nil,
            assumedMaxConcurrent: assumedMaxConcurrent, clock: { [unowned loop = pool.context.loop] in loop.now })
        // The session is built before `self` may be used; nothing reaches the delegate before `start`.
        session.delegate = self
    }

    /// Arms the connect deadline and, on a plain socket already connected, sends the preface: called once the
    /// socket is registered with the loop (a registration that fails leaves no timer behind).
    func start() {
        arm(after: pool.settings.connectTimeout)
        if machine.transport == .tcpConnected && tls == nil { transportReady() }
    }

    var acceptsStream: Bool { machine.acceptsStream && session.terminationReason == nil }

    /// A stream for one exchange; its HEADERS go out when the exchange sends the head.
    func openStream(for owner: UpstreamOwner, method: String) -> H2UpstreamStream {
        perform(machine.handle(.streamOpened))
        return H2UpstreamStream(connection: self, owner: owner, method: method, reused: completedStreams > 0)
    }

    /// Counts a stream moved here from a connection that refused it (`H2UpstreamStream.moveAfterRefusal`).
    func adopt() { perform(machine.handle(.streamOpened)) }

    /// Submits a stream's request head; false when the session takes no new stream (the stream then fails).
    func submit(_ stream: H2UpstreamStream, _ head: SubmittedHead) -> Bool {
        let settings = pool.settings
        guard !machine.isClosed else { return false }
        let submitted: Int32?
        switch head {
        case .fields(let fields):
            submitted = session.submitRequest(fields, scheme: settings.scheme, defaultAuthority: settings.authority)
        case .text(let text):
            submitted = session.submitRequest(text, scheme: settings.scheme, defaultAuthority: settings.authority)
        }
        guard let id = submitted else { return false }
        stream.id = id
        streams[id] = stream
        scheduleFlush()
        return true
    }

    /// A stream is over (completed, failed, reset or abandoned): it no longer counts on this connection.
    func streamFinished(_ stream: H2UpstreamStream, completed: Bool) {
        if stream.id > 0 { streams.removeValue(forKey: stream.id) }
        if completed { completedStreams += 1 }
        perform(machine.handle(.streamEnded))
    }

    /// A reload replaced the pool, or shutdown: no new stream; close when the last one ends.
    func retire() {
        if case .open = machine.state { session.goAway() }
        perform(machine.handle(.retire))
        flush()
    }

    // MARK: the machine's actions

    private func perform(_ action: H2UpstreamConnectionState.Action) {
        switch action {
        case .none:
            break
        case .flush:
            flush()
        case .armIdle:
            arm(after: Double(context.runtime.idleTimeoutNS) / 1e9)
        case .close:
            // (From inside nghttp2 the machine answers `none` and waits in `closing`: see `finishPendingClose`.)
            flush()
            closeSocket()
        case .failStreams(let kind):
            // Taken first: closing the session reports its streams, which must hear `kind` instead.
            let open = streams.values.sorted { $0.id < $1.id }
            streams.removeAll()
            closeSocket()
            for s in open { s.connectionFailed(kind) }
        }
    }

    // MARK: I/O

    func handleEvent(_ events: UInt32) {
        guard !machine.isClosed else { return }
        if machine.transport != .ready {
            if machine.transport == .tcpConnecting {
                guard events & (EventLoop.writable | EventLoop.error | EventLoop.hangup) != 0 else { return }
                if Socket.pendingError(fd) != 0 || events & EventLoop.error != 0 {
                    perform(machine.handle(.connectFailed(.connectRefused)))
                    return
                }
                perform(machine.handle(.tcpConnected))
            }
            if let tls {
                switch tls.handshake() {
                case .done: break
                case .wantRead, .wantWrite: return
                case .failed:
                    perform(machine.handle(.connectFailed(.tlsFailed)))
                    return
                }
            }
            transportReady()
            if machine.isClosed { return }
        }
        readAll()
        if !machine.isClosed { scheduleFlush() }
    }

    /// TCP (and TLS) is up: the session's preface and queued HEADERS may go.
    private func transportReady() {
        deadline = 0
        let h2 = tls.map { $0.negotiatedALPN == "h2" } ?? true
        perform(machine.handle(.connected(h2: h2)))
    }

    private func readAll() {
        while !machine.isClosed {
            let result = tls.map { $0.read(into: inBuf, max: Self.readSize) } ?? Socket.read(fd, into: inBuf, max: Self.readSize)
            switch result {
            case .processed:
                machine.sessionCallStarted()
                let status = session.receive(inBuf.readable)
                machine.sessionCallEnded()
                inBuf.clear()
                if machine.closeOwed {
                    // flush writes the last frames (RST_STREAM, GOAWAY) and then closes.
                    flush()
                    finishPendingClose()
                    return
                }
                if case .closeConnection = status {
                    flush()
                    lost()
                    return
                }
            case .wouldBlock:
                inBuf.release()
                return
            case .eof, .error:
                lost()
                return
            }
        }
    }

    /// Writes what the session has at the end of the loop's batch of events (`H2FlushScheduler`): what every stream
    /// queued meanwhile (HEADERS, DATA, trailers, RST_STREAM, WINDOW_UPDATE) leaves in one write, not one per call.
    func scheduleFlush() {
        if machine.flushWanted() { context.h2Flush.schedule(upstream: self) }
    }

    /// Called by the loop's environment at the end of the batch.
    func scheduledFlushDue() {
        machine.flushDue()
        flush()
    }

    /// Writes what the session has, in slices, until the socket pushes back.
    func flush() {
        // From inside nghttp2: the caller writes once it returns (`readAll` schedules a flush, `flush` loops).
        guard machine.delivery == .idle, machine.transport == .ready, !machine.isClosed || machine.closeOwed else { return }
        while true {
            if outBuf.readableCount < Self.sendSlice && session.wantsWrite {
                machine.sessionCallStarted()
                session.send(maxBytes: Self.sendSlice) { outBuf.append($0) }
                machine.sessionCallEnded()
            }
            if outBuf.isEmpty { break }
            switch (tls.map { $0.write(from: outBuf) } ?? Socket.write(fd, from: outBuf)) {
            case .processed:
                continue
            case .wouldBlock:
                // A closing connection does not wait for a peer that stops reading: its last frames are best effort.
                finishPendingClose()
                return
            case .eof, .error:
                if machine.closeOwed { finishPendingClose() } else { lost() }
                return
            }
        }
        outBuf.shrinkIfIdle(to: 16 * 1024)
        if machine.closeOwed {
            finishPendingClose()
            return
        }
        if session.isFinished { lost() }
    }

    /// A close asked for while nghttp2 was running (the machine's `closing`): the socket closes now, whatever is unsent.
    private func finishPendingClose() {
        guard machine.closeOwedDone() else { return }
        closeSocket()
    }

    /// The byte stream ended or broke: every stream left fails.
    private func lost() {
        guard !machine.isClosed else { return }
        perform(machine.handle(.connectionLost))
    }

    private func closeSocket() {
        context.loop.cancel(timer)
        context.loop.deregister(fd)
        if let tls, machine.transport != .tcpConnecting { tls.shutdown() }
        Socket.close(fd)
        pool.h2Closed(self)
        // Streams still in the session (none usually: the machine failed them first) hear `connectionClosed`.
        session.close()
    }

    // MARK: timers

    private func arm(after seconds: Double) {
        let at = context.loop.now + .nanoseconds(seconds)
        deadline = at
        if !timer.isArmed || timer.deadline > at { context.loop.schedule(timer, at: at) }
    }

    private func timerFired() {
        guard !machine.isClosed else { return }
        switch RequestDeadlines.expiry(of: deadline, now: context.loop.now) {
        case .none: return
        case .early(let at): context.loop.schedule(timer, at: at); return
        case .expired: deadline = 0
        }
        perform(machine.handle(machine.transport == .ready ? .idleDeadline : .connectDeadline))
    }

    // MARK: session events (H2ClientSessionDelegate)

    func h2(_ session: H2ClientSession, didReceiveResponse streamID: Int32, status: Int, headers: HTTPHeaders,
            endStream: Bool) {
        streams[streamID]?.responseHead(status: status, headers: headers, endStream: endStream)
    }

    func h2(_ session: H2ClientSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[streamID] else {
            session.consume(streamID: streamID, bytes: bytes.count)
            return
        }
        stream.responseData(bytes)
    }

    func h2(_ session: H2ClientSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders) {
        streams[streamID]?.responseTrailers(trailers)
    }

    func h2(_ session: H2ClientSession, didCompleteStream streamID: Int32) {
        streams[streamID]?.responseComplete()
    }

    func h2(_ session: H2ClientSession, didFailStream streamID: Int32, _ failure: H2StreamFailure) {
        streams[streamID]?.failed(failure)
    }

    func h2(_ session: H2ClientSession, didReceiveGoAway errorCode: H2ErrorCode, lastStreamID: Int32) {
        perform(machine.handle(.goAway))
    }

    func h2(_ session: H2ClientSession, didDrainOutput streamID: Int32) {
        streams[streamID]?.requestDrained()
    }

    func h2DidReceiveSettings(_ session: H2ClientSession) {
        let m = session.remoteMaxConcurrentStreams
        pool.h2?.knownMaxConcurrent = max(1, m)
        perform(machine.handle(.settings(maxConcurrent: m)))
    }
}
