import EventLoop
import Glibc
import HTTPWire

/// A downstream HTTP/1.1 connection (RFC 9112): reads requests one at a time, runs each through routing
/// and the App Check step, streams it to an upstream and streams the response back, in order
/// (pipelined requests wait in the input buffer until the response before them is complete).
///
/// Backpressure: reading from the client stops while the upstream's send buffer is above
/// `highWater`, and reading from the upstream stops while this connection's send buffer is.
final class ClientConnection: EventHandler, UpstreamOwner {
    static let highWater = 256 * 1024
    static let lowWater = 64 * 1024
    static let readSize = 16 * 1024

    /// `admitting`: the head is read and the App Check step is deciding (possibly waiting for a key-set
    /// refetch or the replay store); body bytes stay buffered until it is done.
    enum Phase { case head, admitting, body, waiting, closed }

    let fd: Int32
    /// The worker owns this object and outlives it (unowned(unsafe): no reference-count traffic per access).
    unowned(unsafe) let worker: Worker
    let peer: SocketAddress
    /// The peer's address as text, formatted once per connection (for `X-Forwarded-For`).
    private(set) lazy var peerIP: String = peer.ipString
    /// Unprocessed input. While reading it is usually the loop's shared scratch buffer (`borrowed`); only
    /// bytes left over after processing are copied into a buffer of the connection's own, so an idle
    /// connection holds no read buffer at all.
    private(set) var inBuf: IOBuffer
    private var borrowed = false
    /// Output; its storage is released whenever it is empty between exchanges.
    let outBuf = IOBuffer(capacity: IOBuffer.releasedCapacity)
    private var parser: HTTPRequestHeadParser
    private(set) var phase = Phase.head
    private var readPaused = false
    private var readPending = false
    private var inputClosed = false
    private var peerHungUp = false
    private var processing = false
    private var requestsSeen = 0
    private var closeAfterResponse = false
    private var clientVersionMinor = 1
    private(set) var exchange: Exchange?
    private var timer: LoopTimer!
    private var deadline: UInt64 = 0
    private var headStarted = false
    /// The connection is in the worker's table until `close()`.
    var registered = false

    /// Plain TCP, or TLS over it (the stream decrypts in place of `read`/`write`).
    enum Transport {
        case plain
        case tls(TLSStream)
    }

    let transport: Transport
    private var handshaking = false
    /// `X-Forwarded-Proto` of this connection.
    var scheme: String { if case .tls = transport { return "https" }; return "http" }

    init(fd: Int32, peer: SocketAddress, worker: Worker, transport: Transport = .plain) {
        self.fd = fd
        self.transport = transport
        self.peer = peer
        self.worker = worker
        inBuf = worker.emptyBuffer
        parser = HTTPRequestHeadParser(limits: worker.runtime.parserLimits)
        timer = LoopTimer { [weak self] in self?.timerFired() }
    }

    // MARK: events

    func handleEvent(_ events: UInt32) {
        if phase == .closed { return }
        if events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 { peerHungUp = true }
        if case .tls(let stream) = transport {
            // A TLS record may need the other direction (a read that must write, a write that must read):
            // on any event, try both.
            if handshaking { continueHandshake(stream); return }
            if readPaused { readPending = true } else { readFromSocket() }
            if phase != .closed { flush() }
            return
        }
        if events & (EventLoop.readable | EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 {
            if readPaused { readPending = true } else { readFromSocket() }
        }
        if phase != .closed && events & EventLoop.writable != 0 { flush() }
    }

    /// Starts serving: a new connection must start its first request (or the h2c preface) within
    /// `header_timeout` from accept, like nginx's `client_header_timeout` (for TLS: the handshake must finish
    /// within it), so a silent connection holds a slot no longer than a slow head would.
    func start() {
        if case .tls(let stream) = transport {
            handshaking = true
            armTimer(worker.loop.now + worker.runtime.headerTimeoutNS)
            continueHandshake(stream)
            return
        }
        armTimer(worker.loop.now + worker.runtime.headerTimeoutNS)
        readFromSocket()
    }

    private func continueHandshake(_ stream: TLSStream) {
        switch stream.handshake() {
        case .done:
            handshaking = false
            if stream.negotiatedALPN == "h2" {
                handOverToHTTP2(initial: UnsafeRawBufferPointer(start: nil, count: 0))
                return
            }
            armTimer(worker.loop.now + worker.runtime.idleTimeoutNS)
            readFromSocket()
        case .wantRead, .wantWrite:
            return
        case .failed:
            worker.countTLSHandshakeFailure()
            abort()
        }
    }

    /// Reads through the transport (TLS decrypts; a short result still means drained).
    @inline(__always)
    private func transportRead(max: Int) -> IOResult {
        switch transport {
        case .plain: return Socket.read(fd, into: inBuf, max: max)
        case .tls(let stream): return stream.read(into: inBuf, max: max)
        }
    }

    @inline(__always)
    private func transportWrite() -> IOResult {
        switch transport {
        case .plain: return Socket.write(fd, from: outBuf)
        case .tls(let stream): return stream.write(from: outBuf)
        }
    }

    private func readFromSocket() {
        if processing { readPending = true; return }
        readPending = false
        borrowScratch()
        defer { returnScratch() }
        while phase != .closed && !readPaused && !inputClosed {
            switch transportRead(max: Self.readSize) {
            case .processed(let n):
                processInput()
                // Short read = drained, unless the peer closed too: the EOF gets no edge of its own.
                if n < Self.readSize && !peerHungUp { return }
            case .wouldBlock:
                return
            case .eof:
                inputClosed = true
                inputEnded()
                return
            case .error:
                abort()
                return
            }
        }
        if readPaused { readPending = true }
    }

    /// Reads go into the loop's scratch buffer when nothing is pending.
    private func borrowScratch() {
        guard inBuf.isEmpty && !borrowed else { return }
        inBuf = worker.scratch
        borrowed = true
    }

    /// Keeps only the leftover bytes (a partial head, pipelined requests, unforwarded body).
    private func returnScratch() {
        guard borrowed else { return }
        borrowed = false
        let scratch = inBuf
        if scratch.isEmpty || phase == .closed {
            inBuf = worker.emptyBuffer
        } else {
            let own = IOBuffer(capacity: max(scratch.readableCount, 1024))
            own.append(scratch.readable)
            inBuf = own
        }
        scratch.clear()
    }

    private func pauseReading() { readPaused = true }

    private func resumeReading() {
        guard readPaused else { return }
        readPaused = false
        processInput()
        if phase != .closed && !readPaused { readFromSocket() }
    }

    private func inputEnded() {
        switch phase {
        case .head:
            // A partial head is abandoned; an empty one is a normal close.
            close()
        case .body:
            // The client went away mid-body: the request can never be completed.
            abort()
        case .waiting:
            // Half-close after a complete request (RFC 9112 §9.6): still answer it, then close.
            closeAfterResponse = true
        case .admitting:
            if exchange?.requestDone == true { closeAfterResponse = true } else { abort() }
        case .closed:
            break
        }
    }

    // MARK: input

    /// Parses and dispatches what is buffered, as far as the current phase allows.
    func processInput() {
        // Re-entrant calls (a synchronous answer finishing an exchange inside this loop) return at once: the
        // outer loop sees the new phase and carries on, so pipelined requests never nest on the stack.
        if processing { return }
        processing = true
        processBuffered()
        processing = false
        // A read asked for while we were busy (reading resumed inside the loop) happens now.
        if readPending && !readPaused && phase != .closed { readFromSocket() }
    }

    private func processBuffered() {
        while phase != .closed {
            switch phase {
            case .head:
                if inBuf.isEmpty { return }
                if !headStarted && requestsSeen == 0 {
                    // h2c with prior knowledge (RFC 9113 §3.3): the client preface instead of a request line.
                    switch H2ServerSession.matchPreface(inBuf.readable) {
                    case .match:
                        let bytes = Array(inBuf.readable)
                        inBuf.consume(inBuf.readableCount)
                        bytes.withUnsafeBytes { handOverToHTTP2(initial: $0) }
                        return
                    case .needMoreBytes:
                        return
                    case .mismatch:
                        break
                    }
                }
                if !headStarted {
                    headStarted = true
                    armTimer(worker.loop.now + worker.runtime.headerTimeoutNS)
                }
                switch parser.parse(inBuf.readable) {
                case .needMore:
                    return
                case .failure(let error):
                    refuseMalformed(error)
                    return
                case .complete(let head, let consumed):
                    inBuf.consume(consumed)
                    parser.reset()
                    headStarted = false
                    requestsSeen += 1
                    begin(head)
                }
            case .body:
                if !forwardBody() { return }
            case .waiting, .admitting:
                // Pipelined (or body) bytes wait; stop reading once more than a head's worth is buffered.
                if inBuf.readableCount > worker.runtime.parserLimits.maxHeadBytes { pauseReading() }
                return
            case .closed:
                return
            }
        }
    }

    private func refuseMalformed(_ error: HTTPParseError) {
        let code: String
        switch error.status {
        case 413: code = "body_too_large"
        case 414: code = "uri_too_long"
        case 431: code = "headers_too_large"
        case 501: code = "not_implemented"
        case 505: code = "http_version_not_supported"
        default: code = "bad_request"
        }
        respondDirect(status: error.status, code: code, reason: error.reason, method: "-", path: "-", close: true)
    }

    // MARK: request

    private func begin(_ head: HTTPRequestHead) {
        let runtime = worker.runtime
        let now = worker.loop.now
        clientVersionMinor = head.versionMinor
        if !head.keepAlive || worker.draining { closeAfterResponse = true }
        let requestId = worker.requestId(from: head.headers)

        let ex: Exchange, target: RequestTarget, route: RouteSettings
        switch RequestAdmission.prepare(head, runtime: runtime, requestId: requestId, now: now) {
        case .admitted(let e, let t, let r):
            (ex, target, route) = (e, t, r)
        case .refused(let refusal):
            if let e = refusal.exchange {
                exchange = e
                cancelTimer()
                respondError(e, status: refusal.status, code: refusal.code, reason: refusal.reason,
                             close: head.framing != .none || refusal.status == 413)
            } else {
                respondDirect(status: refusal.status, code: refusal.code, reason: refusal.reason, method: head.method,
                              path: refusal.path, requestId: requestId, close: head.framing != .none || refusal.status == 400)
            }
            return
        }
        exchange = ex
        cancelTimer()

        phase = .admitting
        worker.appCheck.evaluate(head: head, route: route) { [weak self] decision in
            guard let self, self.phase == .admitting, self.exchange === ex else { return }
            self.admitted(decision, head: head, target: target, route: route, exchange: ex)
        }
    }

    private func admitted(_ decision: AppCheckDecision, head: HTTPRequestHead, target: RequestTarget, route: RouteSettings,
                          exchange ex: Exchange) {
        ex.appCheck = decision.outcome
        ex.appCheckRan = true
        if let rejection = decision.rejection {
            respondError(ex, status: rejection.status, code: rejection.code, reason: rejection.reason,
                         close: !ex.requestDone, retryAfter: rejection.retryAfter)
            return
        }
        // A chunked body already buffered is checked before the upstream sees anything, so a malformed or
        // oversized first chunk is refused without a word to the upstream.
        if case .chunked(let decoder) = ex.requestBody, !inBuf.isEmpty {
            var dry = decoder
            var size = Int64(0)
            let result = dry.decode(inBuf.readable) { size += Int64($0.count) }
            var failure: HTTPParseError?
            if case .failure(let e) = result { failure = e }
            if size > ex.maxBodyBytes { failure = .bodyTooLarge }
            if let e = failure {
                respondError(ex, status: e.status, code: e.status == 413 ? "body_too_large" : "bad_request",
                             reason: e.reason, close: true)
                return
            }
        }
        forward(head: head, target: target, route: route, exchange: ex)
        // Admission may have finished later than the head arrived: continue with what waited meanwhile.
        if phase == .closed { return }
        if readPaused { resumeReading() } else { processInput() }
    }

    private func forward(head: HTTPRequestHead, target: RequestTarget, route: RouteSettings, exchange ex: Exchange) {
        let pool = worker.pool(for: route.upstreamIndex)
        ex.pool = pool
        guard let requestHead = RequestHeadWriter.write(
            head: head, target: target, route: route, upstream: pool.settings, exchange: ex,
            peerIP: peerIP, trusted: worker.runtime.isTrusted(peer), scheme: scheme) else {
            respondError(ex, status: 400, code: "bad_request", reason: "unsafe_header_value", close: true)
            return
        }
        if ex.method != "POST" && ex.method != "PATCH" && ex.requestDone { ex.retainedRequest = requestHead }
        ex.upstreamStart = worker.loop.now
        phase = ex.requestDone ? .waiting : .body
        if phase == .body { armTimer(worker.loop.now + worker.runtime.bodyTimeoutNS) }
        if head.expectContinue && !ex.requestDone { ex.continuePending = true }
        connectUpstream(ex, requestHead: requestHead)
    }

    private func connectUpstream(_ ex: Exchange, requestHead: [UInt8]) {
        guard let pool = ex.pool else { return }
        switch pool.acquire(for: self, method: ex.method) {
        case .failure(let kind):
            upstreamFailed(kind)
        case .success(let upstream):
            ex.upstream = upstream
            upstream.send(requestHead)
            if ex.continuePending {
                ex.continuePending = false
                outBuf.append(Self.continueResponse)
                flush()
            }
            if case .body = phase { processInput() } else { upstream.requestComplete() }
        }
    }

    private static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// Moves buffered body bytes to the upstream; true when the body is complete and input may go on.
    private func forwardBody() -> Bool {
        guard let ex = exchange, let upstream = ex.upstream else { return false }
        switch ex.requestBody {
        case .length(let remaining):
            let available = inBuf.readableCount
            if available == 0 { return false }
            let n = Int(min(Int64(available), remaining))
            upstream.send(UnsafeRawBufferPointer(rebasing: inBuf.readable[0..<n]))
            inBuf.consume(n)
            ex.bodyReceived += Int64(n)
            bodyProgressed()
            if remaining - Int64(n) == 0 {
                ex.requestBody = .done
            } else {
                ex.requestBody = .length(remaining: remaining - Int64(n))
            }
        case .chunked(var decoder):
            if inBuf.isEmpty { return false }
            var overLimit = false
            let limit = ex.maxBodyBytes
            var received = ex.bodyReceived
            let result = decoder.decode(inBuf.readable) { data in
                received += Int64(data.count)
                if received > limit { overLimit = true; return }
                upstream.sendChunk(data)
            }
            ex.bodyReceived = received
            if overLimit {
                upstream.abandon()
                ex.upstream = nil
                respondError(ex, status: 413, code: "body_too_large", reason: "body_too_large", close: true)
                return false
            }
            switch result {
            case .consumed(let n):
                inBuf.consume(n)
                ex.requestBody = .chunked(decoder)
                bodyProgressed()
            case .done(let n):
                inBuf.consume(n)
                upstream.sendLastChunk()
                ex.requestBody = .done
            case .failure(let error):
                upstream.abandon()
                ex.upstream = nil
                respondError(ex, status: error.status, code: error.status == 413 ? "body_too_large" : "bad_request",
                             reason: error.reason, close: true)
                return false
            }
        case .none, .done:
            break
        }
        if ex.requestDone {
            // The body is in: from here the upstream's `response_timeout` bounds the wait.
            cancelTimer()
            phase = ex.responseDone ? .head : .waiting
            upstream.requestComplete()
            if ex.responseDone { finishExchange() }
            return true
        }
        if upstream.outBuf.readableCount > Self.highWater { pauseReading() }
        return false
    }

    /// The upstream drained its send buffer below the low-water mark.
    func upstreamDrained() {
        if phase == .body { resumeReading() }
    }

    // MARK: response (called by UpstreamConnection)

    func upstreamResponseHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming) {
        guard let ex = exchange else { return }
        ex.upstreamEnd = worker.loop.now
        ex.status = head.status
        if !ex.requestDone { closeAfterResponse = true }
        if worker.draining { closeAfterResponse = true }
        ResponseHeadWriter.write(head, framing: framing, into: outBuf, exchange: ex,
                                 clientVersionMinor: clientVersionMinor, closeAfterResponse: &closeAfterResponse)
    }

    /// Appends response body bytes; returns false when the upstream should stop reading for now.
    func upstreamResponseBody(_ data: UnsafeRawBufferPointer) -> Bool {
        guard let ex = exchange, data.count > 0 else { return true }
        switch ex.responseFraming {
        case .chunked:
            outBuf.appendHex(data.count)
            outBuf.append(Self.crlf)
            outBuf.append(data)
            outBuf.append(Self.crlf)
        case .length(let remaining):
            let n = min(Int64(data.count), remaining)
            outBuf.append(UnsafeRawBufferPointer(rebasing: data[0..<Int(n)]))
            ex.responseFraming = .length(remaining: remaining - n)
        case .close:
            outBuf.append(data)
        case .none, .pending:
            break
        }
        // Streamed responses (server-sent events, slow producers) go out as they arrive.
        flush()
        return outBuf.readableCount <= Self.highWater
    }

    private static let crlf: [UInt8] = [13, 10]
    private static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// The whole response has been received.
    func upstreamResponseEnd() {
        guard let ex = exchange else { return }
        if case .chunked = ex.responseFraming { outBuf.append(Self.lastChunk) }
        if case .close = ex.responseFraming { closeAfterResponse = true }
        ex.upstream = nil
        ex.responseDone = true
        if !ex.requestDone {
            // Answered before the body was read: the rest of the body must not be read as a request.
            closeAfterResponse = true
        }
        finishExchange()
    }

    /// The upstream failed; `kind` says how (for the 502/504 and the error metric).
    func upstreamFailed(_ kind: UpstreamFailure) {
        guard let ex = exchange else { return }
        ex.upstream = nil
        worker.countUpstreamError(ex, kind)
        if ex.status != 0 {
            // Part of the response is out already: all we can do is cut the connection.
            logExchange(ex)
            abort()
            return
        }
        if kind.isRetryable, !ex.retried, let request = ex.retainedRequest {
            ex.retried = true
            connectUpstream(ex, requestHead: request)
            return
        }
        if kind == .responseTimeout || kind == .connectTimeout {
            respondError(ex, status: 504, code: "upstream_timeout", reason: kind.rawValue, close: !ex.requestDone)
        } else {
            respondError(ex, status: 502, code: "upstream_unavailable", reason: kind.rawValue, close: !ex.requestDone)
        }
    }

    // MARK: completion

    private func finishExchange() {
        guard let ex = exchange else { return }
        if !ex.requestDone && phase == .body {
            // Still receiving a body the upstream no longer wants: close after flushing.
            closeAfterResponse = true
        }
        logExchange(ex)
        exchange = nil
        if closeAfterResponse {
            phase = .waiting
            flush()
            if phase != .closed && outBuf.isEmpty { close() }
            return
        }
        phase = .head
        flush()
        if phase == .closed { return }
        armTimer(worker.loop.now + worker.runtime.idleTimeoutNS)
        if readPaused { resumeReading() } else { processInput() }
        if phase == .head && inputClosed && inBuf.isEmpty { close() }
    }

    private func logExchange(_ ex: Exchange) {
        worker.record(ex)
    }

    /// An answer of the gateway's own for the current exchange.
    private func respondError(_ ex: Exchange, status: Int, code: String, reason: String, close: Bool,
                              retryAfter: Int? = nil) {
        ex.status = status
        ex.upstream?.abandon()
        ex.upstream = nil
        if close || !ex.requestDone { closeAfterResponse = true }
        ErrorResponse.write(into: outBuf, status: status, code: code, reason: reason, requestId: ex.requestId,
                            close: closeAfterResponse, retryAfter: retryAfter, headOnly: ex.isHead)
        ex.responseDone = true
        ex.requestBody = .done
        finishExchange()
    }

    /// An answer before any exchange exists (malformed request, no route).
    private func respondDirect(status: Int, code: String, reason: String, method: String, path: String,
                               requestId: String? = nil, close: Bool) {
        let id = requestId ?? worker.newRequestId()
        if close { closeAfterResponse = true }
        ErrorResponse.write(into: outBuf, status: status, code: code, reason: reason, requestId: id,
                            close: closeAfterResponse, retryAfter: nil, headOnly: method == "HEAD")
        let ex = Exchange(method: method, path: path, requestId: id, start: worker.loop.now, routeIndex: -1,
                          routeName: "", maxBodyBytes: 0)
        ex.status = status
        ex.appCheck.reason = status == 404 ? nil : reason
        ex.responseDone = true
        exchange = ex
        finishExchange()
    }

    // MARK: output

    /// Writes what is buffered; closes when done and the connection is to close.
    func flush() {
        guard phase != .closed else { return }
        if !outBuf.isEmpty {
            switch transportWrite() {
            case .processed, .wouldBlock: break
            case .eof, .error:
                abort()
                return
            }
        }
        if outBuf.isEmpty {
            if exchange == nil { outBuf.release() }
            if exchange == nil && closeAfterResponse {
                close()
                return
            }
        }
        if outBuf.readableCount <= Self.lowWater, let up = exchange?.upstream { up.clientDrained() }
    }

    // MARK: timers

    private func armTimer(_ at: UInt64) {
        deadline = at
        if !timer.isArmed || timer.deadline > at { worker.loop.schedule(timer, at: at) }
    }

    /// Body bytes arrived: `body_timeout` is the longest gap between two of them (it only moves the deadline;
    /// the timer re-schedules itself when it fires early).
    @inline(__always)
    private func bodyProgressed() {
        armTimer(worker.loop.now + worker.runtime.bodyTimeoutNS)
    }

    private func cancelTimer() {
        deadline = 0
        worker.loop.cancel(timer)
    }

    private func timerFired() {
        guard phase != .closed, deadline != 0 else { return }
        if worker.loop.now < deadline {
            worker.loop.schedule(timer, at: deadline)
            return
        }
        if handshaking {
            abort()
        } else if phase == .head && headStarted {
            respondDirect(status: 408, code: "request_timeout", reason: "header_timeout", method: "-", path: "-", close: true)
        } else if phase == .head {
            close()
        } else if phase == .body, let ex = exchange {
            if readPaused {
                // The upstream is not taking the body: the client is not the one stalling.
                armTimer(worker.loop.now + worker.runtime.bodyTimeoutNS)
            } else if ex.status == 0 {
                // `body_timeout`: answer if nothing of the response went out; the upstream connection is closed
                // (it holds a partial request), and so is this one (the rest of the body could arrive any time).
                respondError(ex, status: 408, code: "request_timeout", reason: "body_timeout", close: true)
            } else {
                abort()
            }
        } else {
            abort()
        }
    }

    /// This socket now speaks HTTP/2: the worker moves it to an `H2Connection` (same fd, same transport).
    private func handOverToHTTP2(initial: UnsafeRawBufferPointer) {
        phase = .closed
        worker.loop.cancel(timer)
        worker.handOver(self, initial: initial)
    }

    // MARK: shutdown

    /// Closes the connection if it is between requests (graceful drain); otherwise marks it to close after the
    /// current response.
    func drain() {
        closeAfterResponse = true
        if phase == .head && !headStarted && exchange == nil && outBuf.isEmpty { close() }
    }

    /// Closes at once, dropping anything in flight.
    func abort() {
        if let up = exchange?.upstream { up.abandon() }
        exchange?.upstream = nil
        close()
    }

    func close() {
        guard phase != .closed else { return }
        phase = .closed
        worker.loop.cancel(timer)
        worker.loop.deregister(fd)
        if case .tls(let stream) = transport, !handshaking { stream.shutdown() }
        Socket.close(fd)
        worker.connectionClosed(self)
    }
}
