import ProxyCore
import EventLoop
import Glibc
import HTTPWire

/// A downstream HTTP/1.1 connection (RFC 9112), the HTTP/1.1 adapter of `Exchange`: it parses request heads one at
/// a time, decodes the body framing, and writes what the exchange answers in HTTP/1.1 (status line, chunked or
/// close-delimited bodies, `100 Continue`, keep-alive). Pipelined requests wait in the input buffer until the
/// response before them is complete. Its deadlines are `RequestDeadlines`.
///
/// Backpressure (`Backpressure`): reading from the client stops while the exchange holds its body (the upstream's send
/// buffer is above `highWater`), and reading from the upstream stops while this connection's send buffer is.
///
/// Requests start only from this connection's own input loop (`processInput`): a pipelined request waiting behind
/// one that an upstream answered starts at the end of the loop's batch of events (`inputTurnDue`), never inside the
/// upstream connection's callback.
package final class ClientConnection: EventHandler, ExchangeResponder {
    static let readSize = 16 * 1024

    package let fd: Int32
    /// The loop's context outlives this object (`Unretained`: no reference-count traffic per access).
    private let contextRef: Unretained<LoopEnvironment>
    var context: LoopEnvironment { @inline(__always) get { contextRef.value } }
    /// Where this connection reports closing or moving to HTTP/2 (the worker, which outlives its connections).
    unowned let connections: any ConnectionTable
    package let peer: SocketAddress
    /// The peer's address as text, formatted once per connection (for `X-Forwarded-For`).
    private(set) lazy var peerIP: String = peer.ipString
    private(set) lazy var peerKey = ConnectionAddressKey(peer)
    /// Unprocessed input. While reading it is usually the loop's shared scratch buffer (`LoopBuffers.lent`); only
    /// bytes left over after processing are copied into a buffer of the connection's own, so an idle
    /// connection holds no read buffer at all.
    private(set) var inBuf: IOBuffer
    /// Output; its storage is released whenever it is empty between exchanges.
    let outBuf = IOBuffer(capacity: IOBuffer.releasedCapacity)
    private var parser: HTTPRequestHeadParser
    /// The lifecycle: what state the connection is in, whether its input is held, whether the client's stream
    /// ended, whether it is kept alive after the exchange (`HTTP1ConnectionStateMachine`). This class performs.
    var machine: HTTP1ConnectionStateMachine
    /// epoll reported the end of the client's stream (handed to HTTP/2 with the socket).
    package var peerHungUp: Bool { machine.peer == .ended }
    /// The connection closes after a response given while the client was still sending (a body not read, bytes
    /// after a malformed head): it lingers instead of closing at once, so the client reads that response rather
    /// than a reset (ClientConnection+Closing.swift).
    var linger: Linger?
    /// When lingering must end at the latest (loop clock).
    var lingerEnds: UInt64 = 0
    var clientVersionMinor = 1
    /// Set by `begin`, cleared by `exchangeFinished` and `close` (ClientConnection+Closing.swift) only.
    package var exchange: Exchange?
    /// How the current request's body is framed on this connection (decoded here, handed to the exchange).
    private var bodyFraming = RequestBodyState.none
    /// How the current response's body is framed towards the client.
    var responseFraming = ClientResponseFraming.pending
    var timeouts: RequestDeadlines
    /// Its action (set at the end of `init`) captures the connection unowned, not weak: a weak reference would give
    /// every connection a side table, and every retain of a connection (several per request) would take the slow
    /// path. Safe: `close()` cancels the timer and `syncTimer` never arms it once closed, so it never fires for a
    /// connection that is gone. A `let`, not a `lazy var`: each read of a lazy one cost a retain and a release.
    let timer = LoopTimer()

    /// Plain TCP, or TLS over it (the stream decrypts in place of `read`/`write`).
    package let transport: Transport
    /// `X-Forwarded-Proto` of this connection.
    var scheme: String { transport.isTLS ? "https" : "http" }
    var peerTrusted: Bool { context.runtime.isTrusted(peer) }

    package init(fd: Int32, peer: SocketAddress, context: LoopEnvironment, connections: any ConnectionTable,
         transport: Transport = .plain) {
        self.fd = fd
        self.connections = connections
        self.transport = transport
        self.peer = peer
        self.contextRef = Unretained(context)
        inBuf = context.buffers.empty
        let runtime = context.runtime
        parser = HTTPRequestHeadParser(limits: runtime.parserLimits)
        var tls = false
        if case .tls = transport { tls = true }
        timeouts = RequestDeadlines(limits: .init(runtime), now: context.loop.now, tls: tls)
        machine = HTTP1ConnectionStateMachine(tls: tls)
        timer.action = { [unowned self] in self.timerFired() }
    }

    // MARK: events

    /// A tunnel reads no more request heads: a new parser lets the old one's reused head storage (the last head's
    /// bytes and field ranges, a few hundred bytes per connection) go once nothing else shares it.
    func dropParserStorage() { parser = HTTPRequestHeadParser(limits: parser.limits) }

    package func handleEvent(_ events: UInt32) {
        let hangup = events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0
        var tls: TLSStream?
        if case .tls(let stream) = transport { tls = stream }
        // A TLS record may need the other direction (a read that must write, a write that must read): on any event,
        // try both.
        let readable = tls != nil || hangup || events & EventLoop.readable != 0
        switch machine.socketEvent(hangup: hangup, readable: readable) {
        case .ignore: return
        case .linger: lingerRead()
        case .relay(let relay): relay.endpoint.clientEvent(events)
        case .clientGone: clientGone()
        case .handshake: if let tls { continueHandshake(tls) }
        case .serve(let read):
            if read { readFromSocket() }
            if machine.state.isServing && (tls != nil || events & EventLoop.writable != 0) { flush() }
        }
    }

    /// Starts serving: a new connection must start its first request (or the h2c preface) within
    /// `header_timeout` from accept, like nginx's `client_header_timeout` (for TLS: the handshake must finish
    /// within it), so a silent connection holds a slot no longer than a slow head would.
    package func start() {
        syncTimer()
        if case .tls(let stream) = transport {
            continueHandshake(stream)
            return
        }
        readFromSocket()
    }

    private func continueHandshake(_ stream: TLSStream) {
        switch stream.handshake() {
        case .done:
            if machine.handshakeDone(h2: stream.negotiatedALPN == "h2") == .handOver {
                handOverToHTTP2(initial: UnsafeRawBufferPointer(start: nil, count: 0))
                return
            }
            timeouts.handshakeDone(now: context.loop.now)
            syncTimer()
            readFromSocket()
        case .wantRead, .wantWrite:
            return
        case .failed:
            context.recorder.countTLSHandshakeFailure()
            abort()
        }
    }

    /// Reads through the transport (TLS decrypts; a short result still means drained).
    @inline(__always)
    private func transportRead(max: Int) -> IOResult {
        transport.read(fd, into: inBuf, max: max)
    }

    @inline(__always)
    private func transportWrite() -> IOResult {
        transport.write(fd, from: outBuf)
    }

    private func readFromSocket() {
        guard machine.readStarting() else { return }
        borrowScratch()
        defer { returnScratch() }
        while machine.state.isServing && !machine.readHeld {
            switch transportRead(max: Self.readSize) {
            case .processed(let n):
                processInput()
                // Short read = drained, unless the peer closed too: the EOF gets no edge of its own.
                if n < Self.readSize && machine.peer == .open && !transport.endOfStreamPending { return }
            case .wouldBlock:
                return
            case .eof, .error:
                clientGone()
                return
            }
        }
        // Paused by what was just read, with the end of the stream already known: no edge will come again.
        if machine.readHeldAfterRead(endPending: transport.endOfStreamPending) { clientGone() }
    }

    /// Reads go into the loop's scratch buffer when nothing is pending (into a buffer of the connection's own when
    /// another reader holds the scratch buffer: the shared `emptyBuffer` is never written to).
    private func borrowScratch() {
        guard inBuf.isEmpty && !context.buffers.lent(inBuf) else { return }
        if let scratch = context.buffers.lendScratch() {
            inBuf = scratch
        } else if inBuf === context.buffers.empty {
            inBuf = IOBuffer(capacity: 0)
        }
    }

    /// Keeps only the leftover bytes (a partial head, pipelined requests, unforwarded body).
    private func returnScratch() {
        guard context.buffers.lent(inBuf) else {
            // A buffer of the connection's own gives its storage back once drained (an idle connection holds none).
            if inBuf !== context.buffers.empty { inBuf.release() }
            return
        }
        let scratch = inBuf
        if scratch.isEmpty || !machine.state.isServing {
            inBuf = context.buffers.empty
        } else {
            let own = IOBuffer(capacity: max(scratch.readableCount, 1024))
            own.append(scratch.readable)
            inBuf = own
        }
        context.buffers.returnScratch()
    }

    private func resumeReading() {
        guard machine.resumeReading() else { return }
        processInput()
        if machine.state.isServing && !machine.readHeld { readFromSocket() }
    }

    /// The client is gone: its byte stream ended (a read returned EOF, a TLS `close_notify`, or the end was reported
    /// while reading is paused) or its connection failed. One policy, nginx's default (`proxy_ignore_client_abort
    /// off`, docs/behaviour.md): the connection closes now. Between requests that is an ordinary close and a partial
    /// head is abandoned; a request under way (body incomplete, response pending or still being written) is aborted:
    /// its upstream connection is closed, not pooled, and it is logged with 499 and `client_closed`. A half-closed
    /// connection never waits for a response (no CLOSE-WAIT).
    private func clientGone() { close(.clientClosed) }

    // MARK: input

    /// Parses and dispatches what is buffered, as far as the current state allows.
    func processInput() {
        // Re-entrant calls (a synchronous answer finishing an exchange inside this loop) return at once: the
        // outer loop sees the new state and carries on, so pipelined requests never nest on the stack.
        guard machine.inputLoopStarting() else { return }
        processBuffered()
        // A read asked for while we were busy (reading resumed inside the loop) happens now.
        if machine.inputLoopEnded() { readFromSocket() }
    }

    private func processBuffered() {
        while true {
            switch machine.state {
            case .head:
                if inBuf.isEmpty { return }
                if machine.mayBePreface {
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
                if machine.headBytes() {
                    timeouts.headStarted(now: context.loop.now)
                    syncTimer()
                }
                switch parser.parse(inBuf.readable) {
                case .needMore:
                    return
                case .failure(let error):
                    refuseMalformed(error)
                    return
                case .complete(let head, let consumed):
                    inBuf.consume(consumed)
                    // The parser reset itself on `.complete`.
                    begin(head)
                }
            case .body:
                if !forwardBody() { return }
            case .busy, .closing:
                // Pipelined (or body) bytes wait; stop reading once more than a head's worth is buffered.
                if inBuf.readableCount > context.runtime.parserLimits.maxHeadBytes { machine.pauseReading() }
                return
            case .handshaking, .lingering, .closed, .tunnel:
                return
            }
        }
    }

    private func refuseMalformed(_ error: HTTPParseError) {
        // The client may still be sending the rest of what was refused (a head over the limit): linger.
        if machine.peer == .open && clientHasUnreadBytes() { linger = .untilClientCloses }
        let code: String
        switch error.status {
        case 413: code = "body_too_large"
        case 414: code = "uri_too_long"
        case 431: code = "headers_too_large"
        case 501: code = "not_implemented"
        case 505: code = "http_version_not_supported"
        default: code = "bad_request"
        }
        answerWithoutRequest(status: error.status, code: code, reason: error.reason)
    }

    /// An answer when no request head could be read (malformed, or `header_timeout`); the connection closes.
    func answerWithoutRequest(status: Int, code: String, reason: String) {
        machine.noRequest()
        let ex = Exchange(malformedWith: nil, context: context, responder: self)
        exchange = ex
        ex.respondError(status: status, code: code, reason: reason, close: true)
    }

    // MARK: request

    private func begin(_ head: HTTPRequestHead) {
        clientVersionMinor = head.versionMinor
        machine.requestHead(keepAlive: head.keepAlive, draining: context.draining)
        switch head.framing {
        case .none: clearBodyFraming()
        case .contentLength(let n): if n == 0 { clearBodyFraming() } else { bodyFraming = .length(remaining: n) }
        case .chunked: bodyFraming = .chunked(ChunkedDecoder(limits: context.runtime.parserLimits))
        }
        var bodyFollows = true
        if case .none = bodyFraming { bodyFollows = false }
        responseFraming = .pending
        let ex = Exchange(head: head, bodyFollows: bodyFollows, context: context, responder: self)
        exchange = ex
        timeouts.headComplete()
        syncTimer()
        ex.begin()
    }

    /// A chunked body already buffered is checked before the upstream sees anything, so a malformed or oversized
    /// first chunk is refused without a word to the upstream.
    func bufferedBodyProblem(maxBodyBytes: Int64) -> HTTPParseError? {
        guard case .chunked(let decoder) = bodyFraming, !inBuf.isEmpty else { return nil }
        var dry = decoder
        var size = Int64(0)
        let result = dry.decode(inBuf.readable) { size += Int64($0.count) }
        if case .failure(let e) = result { return e }
        if size > maxBodyBytes { return .bodyTooLarge }
        return nil
    }

    /// The body is wanted (the connection leaves `busy`), or the body held back has been taken by the upstream.
    func resumeInput(exchange ex: Exchange) {
        guard exchange === ex else { return }
        switch machine.bodyWanted() {
        case .start:
            bodyProgressed()
            // Admission may have finished later than the head arrived: continue with what waited meanwhile.
            if machine.readHeld { resumeReading() } else { processInput() }
        case .resume:
            resumeReading()
        case .none:
            return
        }
    }

    /// Decodes buffered body bytes into the exchange; true when the body is complete and input may go on.
    private func forwardBody() -> Bool {
        guard let ex = exchange else { return false }
        var hold = false
        switch bodyFraming {
        case .length(let remaining):
            let available = inBuf.readableCount
            if available == 0 { return false }
            let n = Int(min(Int64(available), remaining))
            hold = !ex.receiveBody(UnsafeRawBufferPointer(rebasing: inBuf.readable[0..<n]))
            inBuf.consume(n)
            bodyFraming = remaining - Int64(n) == 0 ? .done : .length(remaining: remaining - Int64(n))
        case .chunked(var decoder):
            if inBuf.isEmpty { return false }
            let result = decoder.decode(inBuf.readable) { data in
                if !ex.receiveBody(data) { hold = true }
            }
            if ex.finished { return false }
            switch result {
            case .consumed(let n):
                inBuf.consume(n)
                bodyFraming = .chunked(decoder)
            case .done(let n):
                inBuf.consume(n)
                bodyFraming = .done
                if let trailers = decoder.takeTrailers() { ex.receiveTrailers(trailers) }
            case .failure(let error):
                ex.refuseBody(error)
                return false
            }
        case .none, .done:
            break
        }
        if ex.finished { return false }
        if case .done = bodyFraming {
            // The body is in: from here the upstream's `response_timeout` bounds the wait.
            machine.bodyComplete()
            timeouts.requestComplete()
            syncTimer()
            ex.receiveEnd()
            return machine.state.isServing
        }
        bodyProgressed()
        if hold { machine.pauseReading() }
        return false
    }

    /// `bodyFraming = .none`, skipped when it already is: the assignment destroys the old value through an outlined
    /// switch over the enum's cases (it may hold a `ChunkedDecoder`), twice per request without a body.
    @inline(__always)
    private func clearBodyFraming() {
        if case .none = bodyFraming { return }
        bodyFraming = .none
    }

    // MARK: completion

    func exchangeFinished(_ ex: Exchange) {
        guard exchange === ex else { return }
        switch machine.exchangeFinished() {
        case .ignore:
            return
        case .closeAfterOutput(let mayLinger):
            exchange = nil
            if mayLinger && linger == nil { linger = Linger(unreadBody: bodyFraming, buffered: inBuf.readable) }
            clearBodyFraming()
            flush()
            if case .closing = machine.state, outBuf.isEmpty { closeOrLinger() }
        case .awaitNextRequest:
            exchange = nil
            clearBodyFraming()
            flush()
            if !machine.state.isServing { return }
            timeouts.awaitNextRequest(now: context.loop.now)
            syncTimer()
            // Finished inside this connection's own input loop (a synchronous answer), the loop carries on with the
            // next request, and reads again once it is done. Finished from outside (the upstream's callback, a
            // timer, a late App Check answer): a pipelined request waiting, or reading paused behind this one, goes
            // on at the end of this batch of events.
            if machine.nextRequestReady(buffered: !inBuf.isEmpty) { context.scheduleInputTurn(self) }
        }
    }

    /// Called by the loop's environment at the end of the batch: the next request's turn.
    func inputTurnDue() {
        switch machine.inputTurnDue() {
        case .none: return
        case .resume: resumeReading()
        case .process: processInput()
        }
    }

    // MARK: output

    /// Writes what is buffered; closes when done and the connection is to close.
    func flush() {
        guard machine.state.isServing else { return }
        if !outBuf.isEmpty {
            switch transportWrite() {
            case .processed, .wouldBlock: break
            case .eof, .error:
                clientGone()
                return
            }
        }
        if outBuf.isEmpty {
            if exchange == nil { outBuf.release() }
            if machine.outputDrained(exchangeActive: exchange != nil) {
                closeOrLinger()
                return
            }
        }
        if outBuf.readableCount <= Backpressure.lowWater, let ex = exchange { ex.clientDrained() }
    }
}
