import ProxyCore
import EventLoop
import HTTPWire

/// One HTTP/2 stream, the HTTP/2 adapter of `Exchange`: it hands the request head and DATA to the exchange and
/// writes what the exchange answers as HEADERS and DATA frames. Flow control is the backpressure: DATA is
/// acknowledged (`consume`) once the exchange has taken it, so a slow upstream slows the client.
final class H2StreamExchange: ExchangeResponder {
    let streamID: Int32
    /// Strong: a stream may outlive its connection's table (held by its exchange's upstream connection) and must
    /// be able to call back safely; the connection's methods are no-ops once it closed. The cycle is broken when
    /// the connection removes its streams (stream end, reset, or connection close).
    let connection: H2Connection
    private var context: LoopEnvironment { connection.context }
    private(set) var exchange: Exchange?
    /// DATA the exchange holds back, not yet acknowledged to the client.
    private var unconsumed = 0
    /// `body_timeout`: armed while the request body is still coming, pushed back by every DATA frame.
    private var bodyTimer: LoopTimer?
    /// A gRPC call's `grpc-timeout` (nil for any other request, and for a call without one).
    private var grpcTimer: LoopTimer?
    private var deadlines: RequestDeadlines

    init(streamID: Int32, connection: H2Connection) {
        self.streamID = streamID
        self.connection = connection
        deadlines = RequestDeadlines(limits: .init(connection.context.runtime), now: connection.context.loop.now)
        deadlines.headComplete()
    }

    var peerIP: String { connection.peerIP }
    var peerKey: ConnectionAddressKey { connection.peerKey }
    var peerTrusted: Bool { context.runtime.isTrusted(connection.peer) }
    var scheme: String { connection.scheme }

    // MARK: request

    func begin(_ head: HTTPRequestHead, endStream: Bool) {
        let ex = Exchange(head: head, bodyFollows: !endStream, context: context, responder: self)
        exchange = ex
        if !endStream { bodyProgressed() }
        switch GRPCCall.detect(head.headers) {
        case .notGRPC:
            ex.begin()
        case .call(let timeout):
            ex.grpc = GRPCCall(timeout: timeout)
            ex.begin()
            // A deadline past the end of the monotonic clock (`UInt64` nanoseconds) is none.
            if let timeout, !ex.finished, case (let at, false) = ex.start.addingReportingOverflow(timeout) {
                startGRPCDeadline(at: at)
            }
        case .malformedTimeout:
            // As a gRPC server refuses it (before anything else): 3 INVALID_ARGUMENT, never forwarded.
            ex.grpc = GRPCCall(timeout: nil)
            ex.respondError(status: 400, code: "bad_request", reason: "grpc_timeout_invalid", close: false)
        }
        connection.streamProgressed()
    }

    func requestData(_ bytes: UnsafeRawBufferPointer) {
        guard let ex = exchange, !ex.finished else {
            connection.consume(streamID, bytes.count)
            return
        }
        if !ex.bodyEnded { bodyProgressed() }
        if ex.receiveBody(bytes) || ex.finished {
            connection.consume(streamID, bytes.count)
        } else {
            unconsumed += bytes.count
        }
    }

    func requestEnded() {
        stopBodyTimer()
        exchange?.receiveEnd()
    }

    /// DATA is handed over as it arrives: nothing is held unseen.
    func bufferedBodyProblem(maxBodyBytes: Int64) -> HTTPParseError? { nil }

    /// Whatever the exchange held back is acknowledged now, so the client may send more.
    func resumeInput(exchange: Exchange) {
        guard unconsumed > 0 else { return }
        connection.consume(streamID, unconsumed)
        unconsumed = 0
        connection.streamProgressed()
    }

    // MARK: response (ExchangeResponder)

    func writeHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming, exchange ex: Exchange) -> Bool {
        // A route with `stream_idle_timeout`: the upstream stream's idle bound (bytes either way) replaces
        // `body_timeout` now (SPEC §6.1), as on HTTP/1.1: a gRPC client may pause between its messages.
        if ex.streamsIdle {
            deadlines.streamStarted()
            if let t = bodyTimer { context.loop.cancel(t) }
        }
        // Straight from the upstream's header bytes into the HPACK input (lower-cased there): no String per field. Every
        // field was checked where it was parsed (an HTTP/1.1 head by its parser, an HTTP/2 one by the client session),
        // and the filter removes the hop-by-hop ones: `addChecked`.
        var list = connection.takeHeaderList(capacity: head.headers.bytes.count + 64)
        ResponseHeaderFilter.forEach(head, framing: framing) { name, value, _ in list.addChecked(name, value) }
        // A gRPC server's Trailers-Only answer (a head that ends the stream, `grpc-status` in it) stays one HEADERS
        // frame with END_STREAM: followed by an empty DATA frame, gRPC clients take its fields for initial metadata
        // and find no status. A head without `grpc-status` (an explicit `content-length: 0`, trailers to follow) is
        // not one.
        let grpcStatus = ex.grpc != nil && framing == .contentLength(0) ? GRPCCall.status(in: head.headers) : nil
        let trailersOnly = grpcStatus != nil
        if case .contentLength(let n) = framing, !trailersOnly { list.add("content-length", decimal: n) }
        // Unique per response: never indexed (no HPACK table entry per response; see `addNeverIndexed`).
        ex.id.withBytes { list.addNeverIndexed("x-request-id", $0) }
        var endStream = trailersOnly
        if trailersOnly { ex.grpc?.status = grpcStatus }
        if case .none = framing { endStream = true }
        connection.sendHead(streamID, status: head.status, list: list, endStream: endStream)
        connection.recycle(&list)
        return connection.acceptsMore(streamID)
    }

    func writePart(_ data: UnsafeRawBufferPointer, exchange ex: Exchange) -> Bool {
        connection.sendData(streamID, data, endStream: false)
        connection.streamProgressed()
        return connection.acceptsMore(streamID)
    }

    func writeEnd(requestComplete: Bool, exchange ex: Exchange) {
        if let trailers = ex.responseTrailers {
            if ex.grpc != nil { ex.grpc?.status = GRPCCall.status(in: trailers) }
            // A trailing HEADERS frame (SPEC §6.1): the fields `TrailerFilter` allows, lower-cased by the list (checked
            // where they were parsed, as the head's: `addChecked`).
            var list = H2HeaderList(capacity: 256)
            TrailerFilter.forEachField(trailers) { name, value in list.addChecked(name, value) }
            connection.sendTrailers(streamID, list)
            connection.streamProgressed()
            return
        }
        connection.sendData(streamID, UnsafeRawBufferPointer(start: nil, count: 0), endStream: true)
        connection.streamProgressed()
    }

    func respondComplete(status: Int, headers: [(String, String)], body: [UInt8], close: Bool, exchange ex: Exchange) {
        var fields = headers.map { ($0.0.lowercased(), $0.1) }
        fields.append(("content-length", String(body.count)))
        fields.append(("x-request-id", ex.requestId))
        let headOnly = ex.isHead || body.isEmpty
        connection.sendHead(streamID, status: status, headers: fields, endStream: headOnly)
        if !headOnly { body.withUnsafeBytes { connection.sendData(streamID, $0, endStream: true) } }
        connection.streamProgressed()
    }

    func respondTrailersOnly(_ fields: [(String, String)], exchange ex: Exchange) {
        var fields = fields
        fields.append(("x-request-id", ex.requestId))
        connection.sendHead(streamID, status: 200, headers: fields, endStream: true)
        connection.streamProgressed()
    }

    /// A trailing HEADERS frame with END_STREAM after what was relayed (the call's `grpc-timeout` passed).
    func endGRPCCall(_ trailers: [(String, String)], exchange ex: Exchange) {
        var list = H2HeaderList(capacity: 256)
        for (name, value) in trailers { list.add(name, value) }
        connection.sendTrailers(streamID, list)
        connection.streamProgressed()
    }

    func sendContinue(exchange ex: Exchange) { connection.sendContinue(streamID) }

    func abortResponse(exchange ex: Exchange) {
        connection.reset(streamID, .internalError)
        connection.streamProgressed()
    }

    func exchangeFinished(_ ex: Exchange) {
        stopBodyTimer()
        stopGRPCDeadline()
        // Whatever the exchange held back is acknowledged: the stream's window must not shrink for good.
        if unconsumed > 0 {
            connection.consume(streamID, unconsumed)
            unconsumed = 0
        }
        connection.streamProgressed()
    }

    func outputDrained() { exchange?.clientDrained() }

    // MARK: body_timeout

    private func bodyProgressed() {
        deadlines.bodyProgressed(now: context.loop.now)
        let at = deadlines.deadline
        guard at != 0 else { return }  // a stream past its head: no body gap
        let timer: LoopTimer
        if let t = bodyTimer { timer = t } else {
            timer = LoopTimer { [weak self] in self?.bodyTimerFired() }
            bodyTimer = timer
        }
        // Moving the deadline later costs nothing: the timer re-schedules itself when it fires early.
        if !timer.isArmed { context.loop.schedule(timer, at: at) }
    }

    private func stopBodyTimer() {
        deadlines.requestComplete()
        if let t = bodyTimer { context.loop.cancel(t) }
    }

    private func bodyTimerFired() {
        guard let timer = bodyTimer, let ex = exchange, !ex.finished, !ex.bodyEnded else { return }
        let now = context.loop.now
        switch deadlines.fire(now: now, readPaused: false, responseStarted: false) {
        case .reschedule(let at):
            context.loop.schedule(timer, at: at)
        case .requestTimeout, .abort:
            if ex.bodyTimedOut() {
                deadlines.requestComplete()
                connection.streamProgressed()
            } else {
                // The client is held back by flow control (we have not acknowledged its DATA): not its stall.
                deadlines.bodyProgressed(now: now)
                context.loop.schedule(timer, at: deadlines.deadline)
            }
        case .none, .close:
            return
        }
    }

    // MARK: grpc-timeout

    /// The call's `grpc-timeout`, from the arrival of its head: when it passes first, the exchange ends the call with
    /// DEADLINE_EXCEEDED (Exchange+GRPC.swift). Cancelled when the exchange ends, so a long timeout holds nothing.
    private func startGRPCDeadline(at deadline: UInt64) {
        let timer = LoopTimer { [weak self] in
            guard let self, let ex = self.exchange else { return }
            ex.grpcDeadlinePassed()
            self.connection.streamProgressed()
        }
        grpcTimer = timer
        context.loop.schedule(timer, at: deadline)
    }

    private func stopGRPCDeadline() {
        if let t = grpcTimer { context.loop.cancel(t) }
        grpcTimer = nil
    }

    // MARK: answers of our own

    func refuseHeadersTooLarge() {
        let ex = Exchange(malformedWith: nil, context: context, responder: self)
        exchange = ex
        ex.respondError(status: 431, code: "headers_too_large", reason: "head_too_large", close: false)
    }

    /// The client reset the stream or the connection went away.
    func cancelled(_ cause: Exchange.Cancellation = .connectionClosed) {
        stopBodyTimer()
        stopGRPCDeadline()
        exchange?.cancel(cause)
    }
}
