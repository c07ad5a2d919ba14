import ProxyCore
import EventLoop
import HTTPWire

/// A downstream HTTP/2 connection (RFC 9113) over TLS (ALPN `h2`) or plain TCP (h2c with prior knowledge).
/// nghttp2 (`H2ServerSession`) does the framing, flow control and abuse limits; each stream is an
/// `H2StreamExchange` that goes through the same admission, App Check step and upstream pool as HTTP/1.1.
///
/// Its lifecycle is `H2ConnectionStateMachine`; this class performs what it answers.
///
/// Backpressure: nghttp2's output is pulled only while the socket keeps up (`outBuf` under `Backpressure.highWater`);
/// request DATA is acknowledged (`consume`) only once handed to the upstream, so a slow upstream slows the
/// client through flow control.
package final class H2Connection: EventHandler, H2SessionDelegate {
    static let readSize = 16 * 1024
    /// Response bytes one connection may hold for its streams (beside each stream's own 64 KiB,
    /// `H2Limits.outputLowWatermark`); past it every stream stops reading its upstream until clients read.
    static let connectionBufferLimit = 1 << 20
    /// The same for the whole process (every HTTP/2 connection of every loop).
    static let processBufferLimit = 256 << 20

    let fd: Int32
    /// The loop's context outlives this object (`Unretained`: no reference-count traffic per access).
    private let contextRef: Unretained<LoopEnvironment>
    var context: LoopEnvironment { @inline(__always) get { contextRef.value } }
    /// Where this connection reports closing (the worker, which outlives its connections).
    private unowned let connections: any ConnectionTable
    package let peer: SocketAddress
    let transport: Transport
    private(set) lazy var peerIP: String = peer.ipString
    private(set) lazy var peerKey = ConnectionAddressKey(peer)
    /// Made in `init`, which then makes this connection its delegate. A `let`, not a `lazy var`: each use of a lazy
    /// property went through its getter and a retain and release of the session, about eight times per request.
    private let session: H2ServerSession
    private let inBuf = IOBuffer(capacity: 16 * 1024)
    let outBuf = IOBuffer(capacity: 16 * 1024)
    private(set) var streams = StreamTable<H2StreamExchange>()
    /// The lifecycle: closed or not, the client's end of stream, nghttp2 delivering, a write scheduled.
    private var machine = H2ConnectionStateMachine()
    /// Unowned, not weak (no side table: retains of the connection, several per stream, stay on the fast path):
    /// `close()` cancels the timer and `armIdle` never arms it once closed.
    private lazy var timer = LoopTimer { [unowned self] in self.timerFired() }
    /// `header_timeout` until the first request, then `idle_timeout` while no stream is open (the same rules as an
    /// HTTP/1.1 connection's between requests).
    private var deadlines: RequestDeadlines
    /// Body-less requests received in the current read, started only once every frame of that read is processed:
    /// a stream the client resets in the same read (HEADERS + RST_STREAM, Rapid Reset) never reaches an upstream.
    private var deferredStarts: [(streamID: Int32, head: HTTPRequestHead)] = []
    /// The starts being made by `startDeferred` (swapped with `deferredStarts`: both arrays keep their storage, where a
    /// copy and `removeAll(keepingCapacity:)` allocated a new one per read).
    private var startsInProgress: [(streamID: Int32, head: HTTPRequestHead)] = []
    /// Streams that stopped reading their upstream because this connection or the process held too many response
    /// bytes; `capTimer` resumes them once both are back under half their limits.
    private var capPaused: Set<Int32> = []
    private lazy var capTimer = LoopTimer { [unowned self] in self.capTimerFired() }
    /// This connection's share of `SharedState.h2BufferedResponseBytes` last reported.
    private var reportedBuffered = 0

    var scheme: String { transport.isTLS ? "https" : "http" }

    package init(fd: Int32, peer: SocketAddress, context: LoopEnvironment, connections: any ConnectionTable,
         transport: Transport) {
        self.fd = fd
        self.connections = connections
        self.peer = peer
        self.contextRef = Unretained(context)
        self.transport = transport
        deadlines = RequestDeadlines(limits: .init(context.runtime), now: context.loop.now)
        session = H2ServerSession(limits: H2Limits(parserLimits: context.runtime.parserLimits), delegate: nil,
                                  clock: { [unowned loop = context.loop] in loop.now })
        session.delegate = self
        session.clientResetHook = { [unowned self] in
            self.context.resetBudget.spend(address: self.peerIP, now: self.context.loop.now)
        }
    }

    /// Takes over with the bytes already read (the h2c preface, or nothing after a TLS handshake). `peerHungUp`: the
    /// HTTP/1.1 connection was already told the client's stream ended (an edge is reported once, so it is passed on).
    package func start(initial: UnsafeRawBufferPointer, peerHungUp: Bool) {
        machine = H2ConnectionStateMachine(peerEnded: peerHungUp)
        armIdle()
        if initial.count > 0 { feed(initial) }
        if machine.isOpen { readFromSocket() }
        flush()
    }

    /// Starts the body-less streams of the read just processed that are still open (not reset meanwhile).
    private func startDeferred() {
        guard !deferredStarts.isEmpty, startsInProgress.isEmpty else { return }
        swap(&deferredStarts, &startsInProgress)
        defer { startsInProgress.removeAll(keepingCapacity: true) }
        for i in startsInProgress.indices {
            guard machine.isOpen else { return }
            let (id, head) = startsInProgress[i]
            streams[id]?.begin(head, endStream: true)
        }
    }

    package var isActive: Bool { !streams.isEmpty }

    // MARK: I/O

    package func handleEvent(_ events: UInt32) {
        guard machine.socketEvent(hangup: events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0)
        else { return }
        readFromSocket()
        scheduleFlush()
    }

    private func readFromSocket() {
        defer { if machine.isOpen { startDeferred() } else { deferredStarts.removeAll() } }
        while machine.isOpen {
            switch transport.read(fd, into: inBuf, max: Self.readSize) {
            case .processed(let n):
                feed(inBuf.readable)
                inBuf.clear()
                // Short read = drained, unless the stream's end is known: it gets no edge of its own.
                if n < Self.readSize && machine.peer == .open && !transport.endOfStreamPending { return }
            case .wouldBlock:
                return
            case .eof, .error:
                clientGone()
                return
            }
        }
    }

    private func feed(_ bytes: UnsafeRawBufferPointer) {
        machine.deliveryStarted()
        let status = session.receive(bytes)
        machine.deliveryEnded()
        switch status {
        case .ok:
            break
        case .closeConnection(let reason):
            context.recorder.countH2ProtocolClose(reason)
            flush()
            close()
        }
    }

    /// Pulls frames from nghttp2 while the socket keeps up, writes them, and closes when the session is done.
    /// Never called from inside a session callback (nghttp2 forbids re-entering `send`).
    func flush() {
        guard machine.mayFlush else { return }
        while true {
            if outBuf.readableCount < Backpressure.highWater {
                session.send(maxBytes: Backpressure.highWater - outBuf.readableCount) { outBuf.append($0) }
            }
            if outBuf.isEmpty { break }
            switch transport.write(fd, from: outBuf) {
            case .processed:
                if !outBuf.isEmpty { return }   // the socket is full: EPOLLOUT brings us back
            case .wouldBlock:
                return
            case .eof, .error:
                clientGone()
                return
            }
        }
        outBuf.shrinkIfIdle(to: 16 * 1024)
        syncBuffered()
        if session.isFinished || (!session.wantsRead && !session.wantsWrite) { close() }
    }

    // MARK: session events

    package func h2(_ session: H2ServerSession, didReceiveRequest streamID: Int32, head: HTTPRequestHead, endStream: Bool) {
        let stream = H2StreamExchange(streamID: streamID, connection: self)
        streams[streamID] = stream
        machine.requestReceived()
        armIdle()
        if endStream {
            deferredStarts.append((streamID, head))
        } else {
            stream.begin(head, endStream: endStream)
        }
    }

    package func h2(_ session: H2ServerSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        streams[streamID]?.requestData(bytes)
    }

    package func h2(_ session: H2ServerSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders) {
        streams[streamID]?.exchange?.receiveTrailers(trailers)
    }

    package func h2(_ session: H2ServerSession, didEndStream streamID: Int32) {
        streams[streamID]?.requestEnded()
    }

    package func h2(_ session: H2ServerSession, didResetStream streamID: Int32, errorCode: H2ErrorCode) {
        streams.removeValue(forKey: streamID)?.cancelled()
        armIdle()
    }

    package func h2(_ session: H2ServerSession, didCloseStream streamID: Int32) {
        streams.removeValue(forKey: streamID)?.cancelled()
        armIdle()
    }

    package func h2(_ session: H2ServerSession, streamExceededHeaderLimit streamID: Int32) {
        let stream = H2StreamExchange(streamID: streamID, connection: self)
        streams[streamID] = stream
        machine.requestReceived()
        stream.refuseHeadersTooLarge()
    }

    package func h2(_ session: H2ServerSession, didDrainOutput streamID: Int32) {
        streams[streamID]?.outputDrained()
    }

    // MARK: used by streams

    // After `close()` these do nothing: a stream held elsewhere (its upstream) may still call back, and the closed
    // session ignores it (no nghttp2 session, no streams).

    func sendHead(_ streamID: Int32, status: Int, headers: [(String, String)], endStream: Bool) {
        _ = session.sendResponseHead(streamID: streamID, status: status, headers: headers, endStream: endStream)
    }

    func sendHead(_ streamID: Int32, status: Int, list: H2HeaderList, endStream: Bool) {
        _ = session.sendResponseHead(streamID: streamID, status: status, list: list, endStream: endStream)
    }

    /// A response header list to fill, with the storage of the last one (`recycle`): no allocation per response.
    func takeHeaderList(capacity: Int) -> H2HeaderList {
        var list = H2HeaderList()
        swap(&list, &spareList)
        list.reserve(capacity)
        return list
    }

    /// Takes back a list from `takeHeaderList` once submitted (nghttp2 copied its fields).
    func recycle(_ list: inout H2HeaderList) {
        list.removeAll(keepingUpTo: 8 * 1024)
        swap(&list, &spareList)
    }

    private var spareList = H2HeaderList()

    func sendData(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer, endStream: Bool) {
        _ = session.sendData(streamID: streamID, bytes, endStream: endStream)
    }

    func sendTrailers(_ streamID: Int32, _ trailers: H2HeaderList) {
        guard machine.isOpen else { return }
        _ = session.sendTrailers(streamID: streamID, trailers)
    }

    func sendContinue(_ streamID: Int32) {
        _ = session.sendContinue(streamID: streamID)
    }

    func bufferedBytes(_ streamID: Int32) -> Int { session.bufferedBytes(streamID: streamID) }

    // MARK: bounded response buffering

    /// Whether `streamID` may take more response bytes now (else its exchange stops reading the upstream): its own
    /// buffer is under 64 KiB (nghttp2's drain callback resumes it), and this connection and the process are under
    /// their limits (`capTimer` resumes it).
    func acceptsMore(_ streamID: Int32) -> Bool {
        guard machine.isOpen else { return true }
        syncBuffered()
        if session.bufferedBytes(streamID: streamID) >= session.limits.outputLowWatermark { return false }
        let process = context.shared.h2BufferedResponseBytes.load(ordering: .relaxed)
        if session.totalBufferedBytes >= Self.connectionBufferLimit || process >= Self.processBufferLimit {
            capPaused.insert(streamID)
            if !capTimer.isArmed { context.loop.schedule(capTimer, at: context.loop.now + 10_000_000) }
            return false
        }
        return true
    }

    /// Every 10 ms while streams wait on a limit: resume them once this connection and the process are back under
    /// half their limits.
    private func capTimerFired() {
        guard machine.isOpen, !capPaused.isEmpty else { return }
        syncBuffered()
        let process = context.shared.h2BufferedResponseBytes.load(ordering: .relaxed)
        guard session.totalBufferedBytes < Self.connectionBufferLimit / 2, process < Self.processBufferLimit / 2 else {
            context.loop.schedule(capTimer, at: context.loop.now + 10_000_000)
            return
        }
        let paused = capPaused.sorted()
        capPaused.removeAll()
        for id in paused where machine.isOpen { streams[id]?.outputDrained() }
        flush()
    }

    /// Buffered response bytes (process-wide) above which the heap is trimmed once they fall under `trimLowWater`.
    static let trimHighWater = 16 << 20
    static let trimLowWater = 1 << 20

    /// Brings the process-wide count up to date with this connection's buffered bytes.
    private func syncBuffered() {
        let now = session.totalBufferedBytes  // 0 once closed
        if now != reportedBuffered {
            let shared = context.shared
            let total = shared.h2BufferedResponseBytes.add(now - reportedBuffered, ordering: .relaxed).newValue
            reportedBuffered = now
            // Memory returned when idle (issue 15 #4): glibc keeps freed buffers in its arenas, so after a burst of
            // buffering (zero-window clients) the heap is trimmed once the buffers are gone.
            if total > Self.trimHighWater {
                if !shared.h2BufferedWasHigh.load(ordering: .relaxed) { shared.h2BufferedWasHigh.store(true, ordering: .relaxed) }
            } else if total < Self.trimLowWater, shared.h2BufferedWasHigh.load(ordering: .relaxed),
                      shared.h2BufferedWasHigh.exchange(false, ordering: .relaxed) {
                context.scheduleMemoryTrim()
            }
        }
    }

    func consume(_ streamID: Int32, _ bytes: Int) {
        session.consume(streamID: streamID, bytes: bytes)
    }

    func reset(_ streamID: Int32, _ code: H2ErrorCode) {
        session.resetStream(streamID: streamID, code: code)
    }

    /// A stream produced frames on its own (not inside a session callback): they go out at the end of this batch
    /// of events, together with whatever else the connection's streams produce meanwhile.
    func streamProgressed() { scheduleFlush() }

    private func scheduleFlush() {
        if machine.flushWanted() { context.h2Flush.schedule(self) }
    }

    /// Called by the loop's environment at the end of the batch.
    func scheduledFlushDue() {
        machine.flushDue()
        flush()
    }

    // MARK: lifecycle

    /// Graceful shutdown: GOAWAY, in-flight streams finish, then the connection closes.
    package func drain() {
        session.goAway()
        flush()
    }

    private func armIdle() {
        let now = context.loop.now
        switch machine.idleRule(streamsOpen: !streams.isEmpty) {
        case .none: return
        case .streamsOpen: deadlines.headComplete(); return
        case .firstRequest: deadlines.awaitFirstRequest(now: now)
        case .nextRequest: deadlines.awaitNextRequest(now: now)
        }
        let at = deadlines.deadline
        if !timer.isArmed || timer.deadline > at { context.loop.schedule(timer, at: at) }
    }

    private func timerFired() {
        guard machine.isOpen, streams.isEmpty else { return }
        switch deadlines.fire(now: context.loop.now, readPaused: false, responseStarted: false) {
        case .reschedule(let at):
            context.loop.schedule(timer, at: at)
        case .close:
            drain()
            // Never a request: nothing to wait for (no PING round trip from a client that may not be listening).
            if machine.closesOnIdle(sessionFinished: session.isFinished) { close() }
        case .none, .abort, .requestTimeout:
            return
        }
    }

    package func abort() { close() }

    /// The client is gone: the end of its byte stream (EOF, a TLS `close_notify`, a half-close included) or a failed
    /// read or write ends the connection and all its streams at once (SPEC §6): every stream's upstream request is
    /// cancelled (its connection closed, not pooled), each logged with 499 and `client_closed`, and the slot is freed.
    private func clientGone() { close(.clientClosed) }

    func close(_ cause: Exchange.Cancellation = .connectionClosed) {
        guard machine.close() else { return }
        let open = streams
        streams.removeAll()
        for s in open.values { s.cancelled(cause) }
        session.close()
        syncBuffered()
        capPaused.removeAll()
        deadlines.closed()
        context.loop.cancel(capTimer)
        context.loop.cancel(timer)
        context.loop.deregister(fd)
        if case .tls(let stream) = transport { stream.shutdown() }
        Socket.close(fd)
        connections.h2ConnectionClosed(self)
    }
}
