import EventLoop
import HTTPWire

/// A downstream HTTP/2 connection (RFC 9113) over TLS (ALPN `h2`) or plain TCP (h2c with prior knowledge).
/// nghttp2 (`H2ServerSession`) does the framing, flow control and abuse limits; each stream is an
/// `H2StreamExchange` that goes through the same admission, App Check step and upstream pool as HTTP/1.1.
///
/// Backpressure: nghttp2's output is pulled only while the socket keeps up (`outBuf` under `highWater`);
/// request DATA is acknowledged (`consume`) only once handed to the upstream, so a slow upstream slows the
/// client through flow control.
final class H2Connection: EventHandler, H2SessionDelegate {
    static let highWater = 256 * 1024
    static let readSize = 16 * 1024
    /// Response bytes one connection may hold for its streams (beside each stream's own 64 KiB,
    /// `H2Limits.outputLowWatermark`); past it every stream stops reading its upstream until clients read.
    static let connectionBufferLimit = 1 << 20
    /// The same for the whole process (every HTTP/2 connection of every loop).
    static let processBufferLimit = 256 << 20

    let fd: Int32
    /// The loop's context outlives this object (`Unretained`: no reference-count traffic per access).
    private let contextRef: Unretained<LoopContext>
    var context: LoopContext { @inline(__always) get { contextRef.value } }
    let peer: SocketAddress
    let transport: Transport
    private(set) lazy var peerIP: String = peer.ipString
    private(set) lazy var peerKey = ConnectionAddressKey(peer)
    private var session: H2ServerSession!
    private let inBuf = IOBuffer(capacity: 16 * 1024)
    let outBuf = IOBuffer(capacity: 16 * 1024)
    private(set) var streams = StreamTable<H2StreamExchange>()
    private(set) var closed = false
    /// epoll reported the end of the client's stream (RDHUP, HUP or ERR); bytes before it may still be unread.
    private var peerHungUp = false
    /// True while nghttp2 is delivering callbacks: frames are queued then, and flushed after.
    private var inReceive = false
    private var timer: LoopTimer!
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
    private var capTimer: LoopTimer!
    /// This connection's share of `SharedState.h2BufferedResponseBytes` last reported.
    private var reportedBuffered = 0
    /// Until the first request arrives the connection gets `header_timeout`, not `idle_timeout`: an h2c or
    /// h2 client that sends its preface and nothing else holds a slot no longer than a silent HTTP/1.1 one.
    private var sawRequest = false
    var registered = false

    var scheme: String { transport.isTLS ? "https" : "http" }

    init(fd: Int32, peer: SocketAddress, context: LoopContext, transport: Transport) {
        self.fd = fd
        self.peer = peer
        self.contextRef = Unretained(context)
        self.transport = transport
        deadlines = RequestDeadlines(limits: .init(context.runtime), now: context.loop.now)
        let limits = H2Limits(parserLimits: context.runtime.parserLimits)
        session = H2ServerSession(limits: limits, delegate: self)
        // Unowned, not weak (no side table: retains of the connection, several per stream, stay on the fast path):
        // `close()` cancels the timer and `armIdle` never arms it once closed.
        timer = LoopTimer { [unowned self] in self.timerFired() }
        capTimer = LoopTimer { [unowned self] in self.capTimerFired() }
        session.clientResetHook = { [unowned self] in
            self.context.resetBudget?.spend(address: self.peerIP, now: self.context.loop.now)
        }
    }

    /// Takes over with the bytes already read (the h2c preface, or nothing after a TLS handshake). `peerHungUp`: the
    /// HTTP/1.1 connection was already told the client's stream ended (an edge is reported once, so it is passed on).
    func start(initial: UnsafeRawBufferPointer, peerHungUp: Bool) {
        self.peerHungUp = peerHungUp
        armIdle()
        if initial.count > 0 { feed(initial) }
        if !closed { readFromSocket() }
        if !closed { flush() }
    }

    /// Starts the body-less streams of the read just processed that are still open (not reset meanwhile).
    private func startDeferred() {
        guard !deferredStarts.isEmpty, startsInProgress.isEmpty else { return }
        swap(&deferredStarts, &startsInProgress)
        defer { startsInProgress.removeAll(keepingCapacity: true) }
        for i in startsInProgress.indices {
            guard !closed else { return }
            let (id, head) = startsInProgress[i]
            streams[id]?.begin(head, endStream: true)
        }
    }

    var isActive: Bool { !streams.isEmpty }

    // MARK: I/O

    func handleEvent(_ events: UInt32) {
        if closed { return }
        if events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 { peerHungUp = true }
        readFromSocket()
        scheduleFlush()
    }

    private func readFromSocket() {
        defer { if !closed { startDeferred() } else { deferredStarts.removeAll() } }
        while !closed {
            switch transport.read(fd, into: inBuf, max: Self.readSize) {
            case .processed(let n):
                feed(inBuf.readable)
                inBuf.clear()
                // Short read = drained, unless the stream's end is known: it gets no edge of its own.
                if n < Self.readSize && !peerHungUp && !transport.endOfStreamPending { return }
            case .wouldBlock:
                return
            case .eof, .error:
                clientGone()
                return
            }
        }
    }

    private func feed(_ bytes: UnsafeRawBufferPointer) {
        inReceive = true
        let status = session.receive(bytes)
        inReceive = false
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
        guard !closed, !inReceive else { return }
        while true {
            if outBuf.readableCount < Self.highWater {
                session.send(maxBytes: Self.highWater - outBuf.readableCount) { outBuf.append($0) }
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

    func h2(_ session: H2ServerSession, didReceiveRequest streamID: Int32, head: HTTPRequestHead, endStream: Bool) {
        let stream = H2StreamExchange(streamID: streamID, connection: self)
        streams[streamID] = stream
        sawRequest = true
        armIdle()
        if endStream {
            deferredStarts.append((streamID, head))
        } else {
            stream.begin(head, endStream: endStream)
        }
    }

    func h2(_ session: H2ServerSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        streams[streamID]?.requestData(bytes)
    }

    func h2(_ session: H2ServerSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders) {
        streams[streamID]?.exchange?.receiveTrailers(trailers)
    }

    func h2(_ session: H2ServerSession, didEndStream streamID: Int32) {
        streams[streamID]?.requestEnded()
    }

    func h2(_ session: H2ServerSession, didResetStream streamID: Int32, errorCode: H2ErrorCode) {
        streams.removeValue(forKey: streamID)?.cancelled()
        armIdle()
    }

    func h2(_ session: H2ServerSession, didCloseStream streamID: Int32) {
        streams.removeValue(forKey: streamID)?.cancelled()
        armIdle()
    }

    func h2(_ session: H2ServerSession, streamExceededHeaderLimit streamID: Int32) {
        let stream = H2StreamExchange(streamID: streamID, connection: self)
        streams[streamID] = stream
        sawRequest = true
        stream.refuseHeadersTooLarge()
    }

    func h2(_ session: H2ServerSession, didDrainOutput streamID: Int32) {
        streams[streamID]?.outputDrained()
    }

    // MARK: used by streams

    // After `close()` these do nothing: a stream held elsewhere (its upstream) may still call back.

    func sendHead(_ streamID: Int32, status: Int, headers: [(String, String)], endStream: Bool) {
        guard !closed else { return }
        _ = session.sendResponseHead(streamID: streamID, status: status, headers: headers, endStream: endStream)
    }

    func sendHead(_ streamID: Int32, status: Int, list: H2HeaderList, endStream: Bool) {
        guard !closed else { return }
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
        guard !closed else { return }
        _ = session.sendData(streamID: streamID, bytes, endStream: endStream)
    }

    func sendTrailers(_ streamID: Int32, _ trailers: H2HeaderList) {
        guard !closed else { return }
        _ = session.sendTrailers(streamID: streamID, trailers)
    }

    func sendContinue(_ streamID: Int32) {
        guard !closed else { return }
        _ = session.sendContinue(streamID: streamID)
    }

    func bufferedBytes(_ streamID: Int32) -> Int { closed ? 0 : session.bufferedBytes(streamID: streamID) }

    // MARK: bounded response buffering

    /// Whether `streamID` may take more response bytes now (else its exchange stops reading the upstream): its own
    /// buffer is under 64 KiB (nghttp2's drain callback resumes it), and this connection and the process are under
    /// their limits (`capTimer` resumes it).
    func acceptsMore(_ streamID: Int32) -> Bool {
        guard !closed else { return true }
        syncBuffered()
        if session.bufferedBytes(streamID: streamID) >= session.limits.outputLowWatermark { return false }
        let process = context.shared?.h2BufferedResponseBytes.load(ordering: .relaxed) ?? 0
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
        guard !closed, !capPaused.isEmpty else { return }
        syncBuffered()
        let process = context.shared?.h2BufferedResponseBytes.load(ordering: .relaxed) ?? 0
        guard session.totalBufferedBytes < Self.connectionBufferLimit / 2, process < Self.processBufferLimit / 2 else {
            context.loop.schedule(capTimer, at: context.loop.now + 10_000_000)
            return
        }
        let paused = capPaused.sorted()
        capPaused.removeAll()
        for id in paused where !closed { streams[id]?.outputDrained() }
        flush()
    }

    /// Buffered response bytes (process-wide) above which the heap is trimmed once they fall under `trimLowWater`.
    static let trimHighWater = 16 << 20
    static let trimLowWater = 1 << 20

    /// Brings the process-wide count up to date with this connection's buffered bytes.
    private func syncBuffered() {
        let now = closed ? 0 : session.totalBufferedBytes
        if now != reportedBuffered, let shared = context.shared {
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
        guard !closed else { return }
        session.consume(streamID: streamID, bytes: bytes)
    }

    func reset(_ streamID: Int32, _ code: H2ErrorCode) {
        guard !closed else { return }
        session.resetStream(streamID: streamID, code: code)
    }

    /// A stream produced frames on its own (not inside a session callback): they go out at the end of this batch
    /// of events, together with whatever else the connection's streams produce meanwhile.
    func streamProgressed() { scheduleFlush() }

    private var flushScheduled = false

    private func scheduleFlush() {
        guard !closed, !flushScheduled else { return }
        flushScheduled = true
        context.h2Flush.schedule(self)
    }

    /// Called by the loop context at the end of the batch.
    func scheduledFlushDue() {
        flushScheduled = false
        flush()
    }

    // MARK: lifecycle

    /// Graceful shutdown: GOAWAY, in-flight streams finish, then the connection closes.
    func drain() {
        session.goAway()
        flush()
    }

    private func armIdle() {
        guard !closed else { return }
        let now = context.loop.now
        if !streams.isEmpty {
            deadlines.headComplete()
            return
        }
        if sawRequest { deadlines.awaitNextRequest(now: now) } else { deadlines.awaitFirstRequest(now: now) }
        let at = deadlines.deadline
        if !timer.isArmed || timer.deadline > at { context.loop.schedule(timer, at: at) }
    }

    private func timerFired() {
        guard !closed, streams.isEmpty else { return }
        switch deadlines.fire(now: context.loop.now, readPaused: false, responseStarted: false) {
        case .reschedule(let at):
            context.loop.schedule(timer, at: at)
        case .close:
            drain()
            // Never a request: nothing to wait for (no PING round trip from a client that may not be listening).
            if !closed && (session.isFinished || !sawRequest) { close() }
        case .none, .abort, .requestTimeout:
            return
        }
    }

    func abort() { close() }

    /// The client is gone: the end of its byte stream (EOF, a TLS `close_notify`, a half-close included) or a failed
    /// read or write ends the connection and all its streams at once (SPEC §6): every stream's upstream request is
    /// cancelled (its connection closed, not pooled), each logged with 499 and `client_closed`, and the slot is freed.
    private func clientGone() { close(.clientClosed) }

    func close(_ cause: Exchange.Cancellation = .connectionClosed) {
        guard !closed else { return }
        closed = true
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
        context.connections.h2ConnectionClosed(self)
    }
}
