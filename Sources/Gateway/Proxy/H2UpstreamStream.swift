import ProxyCore
import EventLoop
import HTTPWire

/// One exchange's stream on an `H2UpstreamConnection`: the `UpstreamChannel` the exchange talks to when its upstream
/// says `protocol: h2`. It submits the request head the exchange wrote as HTTP/2 field records (`H2RequestFields`;
/// a head given as HTTP/1.1 text is translated: `:authority` from `Host`, connection-specific fields dropped,
/// `te: trailers` kept), hands the response head, body and trailers to the exchange (`UpstreamOwner`), and maps every
/// way the stream can end onto the same `UpstreamFailure`s as HTTP/1.1.
///
/// Timeouts, as for HTTP/1.1: `response_timeout` until the response head and then between two reads of its body (the
/// route's `stream_idle_timeout` instead once the head is in, when it sets one); request bytes going out push the bound
/// too, so an upstream that never opens its window for the body ends in 504, never a hang.
/// Backpressure: response bytes the client could not take yet are not acknowledged (`consume`) until
/// `clientDrained`, so the upstream's sending on this stream stops at the stream's window; request bytes are buffered in
/// the session up to the exchange's high-water mark (`requestBacklog`) and the exchange hears `upstreamDrained`.
final class H2UpstreamStream: UpstreamChannel {
    /// Strong: the connection outlives its streams (it drops them from its table when they end). Changes only when a
    /// refused stream moves to another connection (`moveAfterRefusal`).
    private(set) var connection: H2UpstreamConnection
    private(set) var owner: UpstreamOwner?
    let method: String
    /// The stream id, once the head was submitted (0 before).
    var id: Int32 = 0
    var streamIdleTimeout: UInt64 = 0
    /// The stream's lifecycle and deadline; this class performs what it answers.
    private(set) var machine: H2UpstreamStreamState
    /// The submitted head, kept until the response head arrives: a stream the server refused (REFUSED_STREAM, or past
    /// its GOAWAY's last stream id) was not processed and is sent again on another connection (RFC 9113 §8.7), at most
    /// `H2UpstreamStreamState.maxMoves` times, while no body byte was given to the session.
    private var submitted: SubmittedHead?
    private var trailers: HTTPHeaders?
    private var timer: LoopTimer?

    init(connection: H2UpstreamConnection, owner: UpstreamOwner, method: String, reused: Bool) {
        self.connection = connection
        self.owner = owner
        self.method = method
        machine = H2UpstreamStreamState(reused: reused,
                                        responseTimeout: .nanoseconds(connection.pool.settings.responseTimeout))
    }

    private var context: LoopEnvironment { connection.context }

    var requestBacklog: Int { id > 0 ? connection.session.bufferedBytes(streamID: id) : 0 }

    // MARK: request (UpstreamChannel)

    func sendHead(_ bytes: UnsafeRawBufferPointer) {
        guard !machine.isDone else { return }
        // A head written as HTTP/1.1 text, translated where it lies (one copy: `H2ClientRequestHead`).
        guard let head = H2ClientRequestHead(bytes, limits: context.runtime.upstreamParserLimits) else {
            perform(machine.handle(.fail(.badResponse)))
            return
        }
        submit(.text(head))
    }

    /// The head the exchange wrote for this stream: its records copied once (`H2RequestFields`), kept for a
    /// resubmission; refused as the text's parse refused a head over the upstream parser limits.
    func sendH2Head(_ records: UnsafeRawBufferPointer, _ draft: H2RequestHeadSink.Draft) {
        guard !machine.isDone else { return }
        guard draft.fits else {
            perform(machine.handle(.fail(.badResponse)))
            return
        }
        submit(.fields(H2RequestFields(records: records, layout: draft.layout)))
    }

    private func submit(_ head: SubmittedHead) {
        submitted = head
        guard connection.submit(self, head) else {
            perform(machine.handle(.fail(.reset)))
            return
        }
        perform(machine.handle(.headSubmitted(endStream: head.endStream, now: context.loop.now)))
    }

    func sendBody(_ bytes: UnsafeRawBufferPointer, chunked: Bool) {
        guard bytes.count > 0, id > 0, case .send = machine.handle(.body(now: context.loop.now)) else { return }
        connection.session.sendData(streamID: id, bytes, endStream: false)
        connection.scheduleFlush()
    }

    func endRequest(chunked: Bool, trailers: HTTPHeaders?) {
        guard id > 0, case .send = machine.handle(.end(now: context.loop.now)) else { return }
        if let trailers, !trailers.isEmpty {
            var list = H2HeaderList(capacity: 256)
            TrailerFilter.forEachField(trailers) { name, value in list.add(name, value) }
            connection.session.sendTrailers(streamID: id, list)
        } else {
            connection.session.sendData(streamID: id, UnsafeRawBufferPointer(start: nil, count: 0), endStream: true)
        }
        connection.scheduleFlush()
    }

    func abandon() {
        perform(machine.handle(.abandon))
    }

    func clientDrained() {
        perform(machine.handle(.clientDrained))
    }

    // MARK: response (from the connection's session)

    func responseHead(status: Int, headers: HTTPHeaders, endStream: Bool) {
        guard let owner, case .deliverHead(let at) = machine.handle(
            .responseHead(now: context.loop.now, streamIdleTimeout: streamIdleTimeout)) else { return }
        submitted = nil
        var contentLength: Int64?
        if let i = headers.firstIndex(ofLiteral: "content-length") {
            contentLength = headers.withValueBytes(at: i) { Self.decimal($0) }
        }
        let head = HTTPResponseHead(status: status, reasonRange: 0..<0, versionMinor: 1, headers: headers,
                                    contentLength: contentLength, isChunked: false, connectionTokens: [], keepAlive: true)
        let framing: ResponseBodyFraming
        if method == "HEAD" || status == 204 || status == 304 {
            framing = .none
        } else if let contentLength {
            framing = .contentLength(contentLength)
        } else {
            framing = endStream ? .contentLength(0) : .chunked
        }
        arm(at)
        if !owner.upstreamResponseHead(head, framing: framing) { perform(machine.handle(.clientFull)) }
    }

    func responseData(_ bytes: UnsafeRawBufferPointer) {
        guard let owner, case .deliverData = machine.handle(.responseData(count: bytes.count, now: context.loop.now)) else {
            connection.session.consume(streamID: id, bytes: bytes.count)
            return
        }
        let more = owner.upstreamResponseBody(bytes)
        // Inside the session's callback: the connection writes the WINDOW_UPDATE once `receive` returns.
        if case .consume(let n) = machine.handle(.delivered(count: bytes.count, more: more)) {
            connection.session.consume(streamID: id, bytes: n)
        }
    }

    func responseTrailers(_ fields: HTTPHeaders) {
        trailers = fields
    }

    func responseComplete() {
        perform(machine.handle(.complete))
    }

    func failed(_ failure: H2StreamFailure) {
        perform(machine.handle(.streamFailed(failure)))
    }

    /// The connection failed under the stream (connect refused or timed out, no `h2` by ALPN, lost).
    func connectionFailed(_ kind: UpstreamFailure) {
        perform(machine.handle(.connectionFailed(kind)))
    }

    func requestDrained() { owner?.upstreamDrained() }

    // MARK: the machine's actions

    private func perform(_ action: H2UpstreamStreamState.Action) {
        switch action {
        case .none, .send, .deliverHead, .deliverData:
            // (`send`, `deliverHead` and `deliverData` are performed where the bytes are: see their callers.)
            break
        case .arm(let at):
            arm(at)
        case .consume(let n):
            // The client drained (bytes of a finished stream are acknowledged where they arrive: `responseData`).
            guard id > 0 else { return }
            connection.session.consume(streamID: id, bytes: n)
            connection.scheduleFlush()
        case .move:
            if !moveAfterRefusal() { perform(machine.handle(.fail(.staleConnection))) }
        case .complete:
            let o = owner
            owner = nil
            finish(completed: true)
            if let trailers { o?.upstreamResponseTrailers(trailers) }
            o?.upstreamResponseEnd()
        case .abandon(let reset):
            owner = nil
            finish(completed: false)
            if reset { connection.session.resetStream(streamID: id, code: .cancel) }
            connection.scheduleFlush()
        case .fail(let kind, let reset):
            let o = owner
            owner = nil
            finish(completed: false)
            if reset { connection.session.resetStream(streamID: id, code: .cancel) }
            o?.upstreamFailed(kind)
        }
    }

    /// The server did not process the stream: it goes to a connection that takes it (a new one if none), unseen by
    /// the exchange. False when it cannot (no head kept, no connection).
    private func moveAfterRefusal() -> Bool {
        guard let head = submitted, let pool = connection.pool.h2 else { return false }
        let old = connection
        guard case .success(let next) = pool.connection(heavy: false) else { return false }
        old.streamFinished(self, completed: false)
        id = 0
        connection = next
        _ = machine.handle(.moved(reused: next.completedStreams > 0))
        next.adopt()
        if !next.submit(self, head) { perform(machine.handle(.fail(.staleConnection))) }
        return true
    }

    private func finish(completed: Bool) {
        if let timer { context.loop.cancel(timer) }
        connection.streamFinished(self, completed: completed)
    }

    /// A `content-length` value (nghttp2 already checked it is one number matching the DATA).
    private static func decimal(_ value: UnsafeRawBufferPointer) -> Int64? {
        guard !value.isEmpty, value.count <= 18 else { return nil }
        var n: Int64 = 0
        for byte in value {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            n = n * 10 + Int64(byte - 0x30)
        }
        return n
    }

    // MARK: timers

    /// Runs the timer at `at` unless it runs earlier already (a firing before the deadline rearms it).
    private func arm(_ at: UInt64) {
        let t: LoopTimer
        if let timer { t = timer } else {
            t = LoopTimer { [unowned self] in self.timerFired() }
            timer = t
        }
        if !t.isArmed || t.deadline > at { context.loop.schedule(t, at: at) }
    }

    private func timerFired() {
        let action = machine.handle(.timer(now: context.loop.now))
        perform(action)
        if case .fail = action { connection.scheduleFlush() }
    }
}
