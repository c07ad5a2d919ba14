import ProxyCore
import EventLoop
import HTTPWire

/// One exchange's stream on an `H2UpstreamConnection`: the `UpstreamChannel` the exchange talks to when its upstream
/// says `protocol: h2`. It turns the HTTP/1.1 request head the exchange wrote into an HTTP/2 one (`:authority` from
/// `Host`, connection-specific fields dropped, `te: trailers` kept), hands the response head, body and trailers to the
/// exchange (`UpstreamOwner`), and maps every way the stream can end onto the same `UpstreamFailure`s as HTTP/1.1.
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
    /// The connection had served other streams when this one opened (see `UpstreamFailure.staleConnection`).
    private var reused: Bool
    /// The submitted head, kept until the response head arrives: a stream the server refused (REFUSED_STREAM, or past
    /// its GOAWAY's last stream id) was not processed and is sent again on another connection (RFC 9113 §8.7), at most
    /// `maxMoves` times, while no body byte was given to the session.
    private var submitted: H2ClientRequestHead?
    private var moves = 0
    private var bodyGiven = false
    static let maxMoves = 3
    private var responseSeen = false
    private var headArrived = false
    /// Response bytes handed to the client while it was full, not yet acknowledged to the upstream.
    private var unconsumed = 0
    private var paused = false
    private var trailers: HTTPHeaders?
    private var requestEnded = false
    private var over = false
    private var timer: LoopTimer?
    private var deadline: UInt64 = 0

    init(connection: H2UpstreamConnection, owner: UpstreamOwner, method: String, reused: Bool) {
        self.connection = connection
        self.owner = owner
        self.method = method
        self.reused = reused
    }

    private var context: LoopEnvironment { connection.context }

    var requestBacklog: Int { id > 0 ? connection.session.bufferedBytes(streamID: id) : 0 }

    // MARK: request (UpstreamChannel)

    func sendHead(_ bytes: UnsafeRawBufferPointer) {
        guard !over else { return }
        // The writer's own head, translated where it lies (no parse of it again, one copy: `H2ClientRequestHead`).
        guard let head = H2ClientRequestHead(bytes, limits: context.runtime.upstreamParserLimits) else {
            fail(.badResponse)
            return
        }
        requestEnded = head.endStream
        submitted = head
        guard connection.submit(self, head) else {
            fail(.reset)
            return
        }
        armResponseBound()
    }

    func sendBody(_ bytes: UnsafeRawBufferPointer, chunked: Bool) {
        guard !over, id > 0, !requestEnded, bytes.count > 0 else { return }
        connection.session.sendData(streamID: id, bytes, endStream: false)
        bodyGiven = true
        moved()
        connection.scheduleFlush()
    }

    func endRequest(chunked: Bool, trailers: HTTPHeaders?) {
        guard !over, id > 0, !requestEnded else { return }
        requestEnded = true
        bodyGiven = true
        if let trailers, !trailers.isEmpty {
            var list = H2HeaderList()
            TrailerFilter.forEachField(trailers) { name, value in list.add(name, value) }
            connection.session.sendTrailers(streamID: id, list)
        } else {
            connection.session.sendData(streamID: id, UnsafeRawBufferPointer(start: nil, count: 0), endStream: true)
        }
        moved()
        connection.scheduleFlush()
    }

    func abandon() {
        guard !over else { return }
        owner = nil
        finish(completed: false)
        if id > 0 { connection.session.resetStream(streamID: id, code: .cancel) }
        connection.scheduleFlush()
    }

    func clientDrained() {
        guard !over, paused else { return }
        paused = false
        if unconsumed > 0, id > 0 {
            connection.session.consume(streamID: id, bytes: unconsumed)
            unconsumed = 0
            connection.scheduleFlush()
        }
    }

    // MARK: response (from the connection's session)

    func responseHead(status: Int, headers: HTTPHeaders, endStream: Bool) {
        guard !over, let owner else { return }
        responseSeen = true
        headArrived = true
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
        if streamIdleTimeout != 0 { arm(streamIdleTimeout, kind: .streamIdleTimeout) } else { armResponseBound() }
        if !owner.upstreamResponseHead(head, framing: framing) { paused = true }
    }

    func responseData(_ bytes: UnsafeRawBufferPointer) {
        guard !over, let owner else {
            connection.session.consume(streamID: id, bytes: bytes.count)
            return
        }
        moved()
        let more = owner.upstreamResponseBody(bytes)
        if more && !paused {
            connection.session.consume(streamID: id, bytes: bytes.count)
        } else {
            paused = true
            unconsumed += bytes.count
        }
    }

    func responseTrailers(_ fields: HTTPHeaders) {
        trailers = fields
    }

    func responseComplete() {
        guard !over else { return }
        let o = owner
        owner = nil
        finish(completed: true)
        if let trailers { o?.upstreamResponseTrailers(trailers) }
        o?.upstreamResponseEnd()
    }

    func failed(_ failure: H2StreamFailure) {
        switch failure {
        case .refused: if !moveAfterRefusal() { fail(.staleConnection) }
        case .malformed: fail(.badResponse)
        case .reset: fail(.reset)
        case .connectionClosed: fail(reused && !responseSeen ? .staleConnection : .reset)
        }
    }

    /// The connection failed under the stream (connect refused or timed out, no `h2` by ALPN, lost).
    func connectionFailed(_ kind: UpstreamFailure) {
        fail(kind == .reset && reused && !responseSeen ? .staleConnection : kind)
    }

    func requestDrained() { owner?.upstreamDrained() }

    /// The server did not process the stream: it goes to a connection that takes it (a new one if none), unseen by
    /// the exchange. False when it cannot (a body byte already went to the session, too many moves, no connection).
    private func moveAfterRefusal() -> Bool {
        guard !over, !bodyGiven, moves < Self.maxMoves, let head = submitted, let pool = connection.pool.h2 else {
            return false
        }
        moves += 1
        let old = connection
        guard case .success(let next) = pool.connection(heavy: false) else { return false }
        old.streamFinished(self, completed: false)
        id = 0
        connection = next
        reused = next.completedStreams > 0
        next.adopt()
        guard next.submit(self, head) else {
            fail(.staleConnection)
            return true
        }
        return true
    }

    private func fail(_ kind: UpstreamFailure) {
        guard !over else { return }
        let o = owner
        owner = nil
        let wasOpen = id > 0
        finish(completed: false)
        if wasOpen && kind != .staleConnection { connection.session.resetStream(streamID: id, code: .cancel) }
        o?.upstreamFailed(kind)
    }

    private func finish(completed: Bool) {
        over = true
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

    private func armResponseBound() {
        arm(.nanoseconds(connection.pool.settings.responseTimeout), kind: .responseTimeout)
    }

    private var deadlineKind = UpstreamFailure.responseTimeout

    private func arm(_ after: UInt64, kind: UpstreamFailure) {
        deadlineKind = kind
        deadline = context.loop.now &+ after
        let t: LoopTimer
        if let timer { t = timer } else {
            t = LoopTimer { [unowned self] in self.timerFired() }
            timer = t
        }
        if !t.isArmed || t.deadline > deadline { context.loop.schedule(t, at: deadline) }
    }

    /// Bytes moved on the stream: the current bound starts again.
    private func moved() {
        guard deadline != 0 else { return }
        let after = deadlineKind == .streamIdleTimeout ? streamIdleTimeout
            : UInt64.nanoseconds(connection.pool.settings.responseTimeout)
        deadline = context.loop.now &+ after
    }

    private func timerFired() {
        guard !over, deadline != 0, let timer else { return }
        let now = context.loop.now
        if now < deadline { context.loop.schedule(timer, at: deadline); return }
        fail(deadlineKind)
        connection.scheduleFlush()
    }
}
