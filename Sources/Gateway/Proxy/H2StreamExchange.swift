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
    private var context: LoopContext { connection.context }
    private(set) var exchange: Exchange?
    /// DATA the exchange holds back, not yet acknowledged to the client.
    private var unconsumed = 0
    /// `body_timeout`: armed while the request body is still coming, pushed back by every DATA frame.
    private var bodyTimer: LoopTimer?
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
        ex.begin()
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
        // Straight from the upstream's header bytes into the HPACK input (lower-cased there): no String per field.
        var list = connection.takeHeaderList(capacity: head.headers.bytes.count + 64)
        ResponseHeaderFilter.forEach(head, framing: framing) { name, value, _ in list.add(name, value) }
        if case .contentLength(let n) = framing { list.add("content-length", decimal: n) }
        // Unique per response: never indexed (no HPACK table entry per response; see `addNeverIndexed`).
        ex.id.withBytes { list.addNeverIndexed("x-request-id", $0) }
        var endStream = false
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
            // A trailing HEADERS frame (SPEC §6.1): the fields `TrailerFilter` allows, lower-cased by the list.
            var list = H2HeaderList()
            TrailerFilter.forEachField(trailers) { name, value in list.add(name, value) }
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

    func sendContinue(exchange ex: Exchange) { connection.sendContinue(streamID) }

    func abortResponse(exchange ex: Exchange) {
        connection.reset(streamID, .internalError)
        connection.streamProgressed()
    }

    func exchangeFinished(_ ex: Exchange) {
        stopBodyTimer()
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

    // MARK: answers of our own

    func refuseHeadersTooLarge() {
        let ex = Exchange(malformedWith: nil, context: context, responder: self)
        exchange = ex
        ex.respondError(status: 431, code: "headers_too_large", reason: "head_too_large", close: false)
    }

    /// The client reset the stream or the connection went away.
    func cancelled(_ cause: Exchange.Cancellation = .connectionClosed) {
        stopBodyTimer()
        exchange?.cancel(cause)
    }
}
