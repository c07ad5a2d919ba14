import EventLoop
import HTTPWire

/// One HTTP/2 stream proxied to an HTTP/1.1 upstream: the HTTP/2 counterpart of `ClientConnection`'s
/// request path (same admission, App Check step, header rewriting, pool, errors, logs and metrics).
final class H2StreamExchange: UpstreamOwner {
    let streamID: Int32
    /// Strong: a stream may outlive its connection's table (held by its upstream connection) and must be
    /// able to call back safely; the connection's methods are no-ops once it closed. The cycle is broken
    /// when the connection removes its streams (stream end, reset, or connection close).
    let connection: H2Connection
    private var worker: Worker { connection.worker }
    private var exchange: Exchange?
    private var head: HTTPRequestHead?
    private var admitting = false
    private var forwarding = false
    private var endOfRequest = false
    /// Request DATA received while the App Check step decides (bounded by the stream's flow-control window).
    private var pendingBody: [UInt8] = []
    /// DATA handed to the upstream but not yet acknowledged to the client (the upstream's buffer is full).
    private var unconsumed = 0
    private var chunkedUpstream = false
    private var headSent = false
    private var finished = false
    /// `body_timeout`: armed while the request body is still coming, pushed back by every DATA frame.
    private var bodyTimer: LoopTimer?
    private var bodyDeadline: UInt64 = 0

    init(streamID: Int32, connection: H2Connection) {
        self.streamID = streamID
        self.connection = connection
    }

    // MARK: request

    func begin(_ head: HTTPRequestHead, endStream: Bool) {
        self.head = head
        endOfRequest = endStream
        let requestId = worker.requestId(from: head.headers)
        let ex: Exchange, target: RequestTarget, route: RouteSettings
        switch RequestAdmission.prepare(head, runtime: worker.runtime, requestId: requestId, now: worker.loop.now) {
        case .admitted(let e, let t, let r):
            (ex, target, route) = (e, t, r)
        case .refused(let refusal):
            let e = refusal.exchange ?? Exchange(method: head.method, path: refusal.path, requestId: requestId,
                                                 start: worker.loop.now, routeIndex: -1, routeName: "", maxBodyBytes: 0)
            exchange = e
            respondError(status: refusal.status, code: refusal.code, reason: refusal.reason)
            return
        }
        exchange = ex
        if case .chunked = ex.requestBody { chunkedUpstream = true }
        if !endStream { bodyProgressed() }
        admitting = true
        worker.appCheck.evaluate(head: head, route: route) { [weak self] decision in
            guard let self, self.admitting, !self.finished else { return }
            self.admitting = false
            ex.appCheck = decision.outcome
            ex.appCheckRan = true
            if let r = decision.rejection {
                self.respondError(status: r.status, code: r.code, reason: r.reason, retryAfter: r.retryAfter)
            } else {
                self.forward(head: head, target: target, route: route, exchange: ex)
            }
            self.connection.streamProgressed()
        }
    }

    private func forward(head: HTTPRequestHead, target: RequestTarget, route: RouteSettings, exchange ex: Exchange) {
        let pool = worker.pool(for: route.upstreamIndex)
        ex.pool = pool
        guard let requestHead = RequestHeadWriter.write(
            head: head, target: target, route: route, upstream: pool.settings, exchange: ex,
            peerIP: connection.peerIP, trusted: worker.runtime.isTrusted(connection.peer), scheme: connection.scheme) else {
            respondError(status: 400, code: "bad_request", reason: "unsafe_header_value")
            return
        }
        ex.upstreamStart = worker.loop.now
        switch pool.acquire(for: self, method: ex.method) {
        case .failure(let kind):
            upstreamFailed(kind)
            return
        case .success(let upstream):
            ex.upstream = upstream
            forwarding = true
            upstream.send(requestHead)
            if head.expectContinue && !endOfRequest { connection.sendContinue(streamID) }
            if !pendingBody.isEmpty {
                let body = pendingBody
                pendingBody = []
                body.withUnsafeBytes { forwardData($0) }
            }
            if endOfRequest { finishRequestBody() }
        }
    }

    func requestData(_ bytes: UnsafeRawBufferPointer) {
        guard let ex = exchange, !finished else {
            connection.consume(streamID, bytes.count)
            return
        }
        ex.bodyReceived += Int64(bytes.count)
        if !endOfRequest { bodyProgressed() }
        if ex.bodyReceived > ex.maxBodyBytes {
            respondError(status: 413, code: "body_too_large", reason: "body_too_large")
            return
        }
        if admitting {
            pendingBody.append(contentsOf: bytes)
        } else if forwarding {
            forwardData(bytes)
        } else {
            connection.consume(streamID, bytes.count)
        }
    }

    private func forwardData(_ bytes: UnsafeRawBufferPointer) {
        guard let upstream = exchange?.upstream else { return }
        if chunkedUpstream { upstream.sendChunk(bytes) } else { upstream.send(bytes) }
        if upstream.outBuf.readableCount > ClientConnection.highWater {
            unconsumed += bytes.count
        } else {
            connection.consume(streamID, bytes.count)
        }
    }

    func requestEnded() {
        endOfRequest = true
        stopBodyTimer()
        if forwarding { finishRequestBody() }
    }

    private func finishRequestBody() {
        guard let upstream = exchange?.upstream else { return }
        if chunkedUpstream { upstream.sendLastChunk() }
        exchange?.requestBody = .done
        upstream.requestComplete()
    }

    // MARK: response (UpstreamConnection)

    func upstreamResponseHead(_ response: HTTPResponseHead, framing: ResponseBodyFraming) {
        guard let ex = exchange, !finished else { return }
        ex.upstreamEnd = worker.loop.now
        ex.status = response.status
        var headers: [(String, String)] = []
        headers.reserveCapacity(response.headers.count + 1)
        let tokens = response.connectionTokens
        response.headers.bytes.withUnsafeBytes { raw in
            for f in response.headers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                switch HeaderKind.classify(name) {
                case .hopByHop, .requestId: continue
                case .contentLength:
                    if case .chunked = framing { continue }
                    if case .untilClose = framing { continue }
                default:
                    if !tokens.isEmpty && HeaderKind.isListed(name, in: tokens) { continue }
                }
                let value = String(decoding: raw[Int(f.valueStart)..<Int(f.valueEnd)], as: UTF8.self)
                headers.append((String(decoding: name, as: UTF8.self).lowercased(), value))
            }
        }
        headers.append(("x-request-id", ex.requestId))
        var endStream = false
        if case .none = framing { endStream = true }
        headSent = true
        connection.sendHead(streamID, status: response.status, headers: headers, endStream: endStream)
    }

    func upstreamResponseBody(_ data: UnsafeRawBufferPointer) -> Bool {
        guard !finished, data.count > 0 else { return true }
        connection.sendData(streamID, data, endStream: false)
        connection.streamProgressed()
        return connection.bufferedBytes(streamID) <= ClientConnection.highWater
    }

    func upstreamResponseEnd() {
        guard let ex = exchange, !finished else { return }
        ex.upstream = nil
        if ex.status != 0 && headSent { connection.sendData(streamID, UnsafeRawBufferPointer(start: nil, count: 0), endStream: true) }
        finish()
        connection.streamProgressed()
    }

    func upstreamFailed(_ kind: UpstreamFailure) {
        guard let ex = exchange, !finished else { return }
        ex.upstream = nil
        worker.countUpstreamError(ex, kind)
        if headSent {
            connection.reset(streamID, .internalError)
            finish()
        } else if kind == .responseTimeout || kind == .connectTimeout {
            respondError(status: 504, code: "upstream_timeout", reason: kind.rawValue)
        } else {
            respondError(status: 502, code: "upstream_unavailable", reason: kind.rawValue)
        }
        connection.streamProgressed()
    }

    func upstreamDrained() {
        if unconsumed > 0 {
            connection.consume(streamID, unconsumed)
            unconsumed = 0
            connection.streamProgressed()
        }
    }

    func outputDrained() { exchange?.upstream?.clientDrained() }

    // MARK: body_timeout

    private func bodyProgressed() {
        let at = worker.loop.now + worker.runtime.bodyTimeoutNS
        bodyDeadline = at
        let timer: LoopTimer
        if let t = bodyTimer { timer = t } else {
            timer = LoopTimer { [weak self] in self?.bodyTimerFired() }
            bodyTimer = timer
        }
        // Moving the deadline later costs nothing: the timer re-schedules itself when it fires early.
        if !timer.isArmed { worker.loop.schedule(timer, at: at) }
    }

    private func stopBodyTimer() {
        bodyDeadline = 0
        if let t = bodyTimer { worker.loop.cancel(t) }
    }

    private func bodyTimerFired() {
        guard let timer = bodyTimer, bodyDeadline != 0, !finished, !endOfRequest, exchange != nil else { return }
        if worker.loop.now < bodyDeadline || admitting || unconsumed > 0 {
            // Early, or the client is held back by flow control (we have not acknowledged its DATA yet).
            if worker.loop.now >= bodyDeadline { bodyDeadline = worker.loop.now + worker.runtime.bodyTimeoutNS }
            worker.loop.schedule(timer, at: bodyDeadline)
            return
        }
        bodyDeadline = 0
        // 408 if nothing of the response went out, else a reset; either way the upstream connection (holding a
        // partial request) is closed.
        respondError(status: 408, code: "request_timeout", reason: "body_timeout")
        connection.streamProgressed()
    }

    // MARK: answers of our own

    func refuseHeadersTooLarge() {
        exchange = Exchange(method: "-", path: "-", requestId: worker.newRequestId(), start: worker.loop.now,
                            routeIndex: -1, routeName: "", maxBodyBytes: 0)
        respondError(status: 431, code: "headers_too_large", reason: "header_list_too_large")
    }

    private func respondError(status: Int, code: String, reason: String, retryAfter: Int? = nil) {
        guard let ex = exchange, !finished else { return }
        ex.upstream?.abandon()
        ex.upstream = nil
        ex.status = status
        if headSent {
            connection.reset(streamID, .internalError)
            finish()
            return
        }
        let body = Array(ErrorResponse.body(code: code, reason: reason, requestId: ex.requestId).utf8)
        var headers: [(String, String)] = [("content-type", "application/json"), ("content-length", String(body.count)),
                                           ("x-request-id", ex.requestId)]
        if let retryAfter { headers.append(("retry-after", String(retryAfter))) }
        let headOnly = ex.method == "HEAD"
        headSent = true
        connection.sendHead(streamID, status: status, headers: headers, endStream: headOnly)
        if !headOnly { body.withUnsafeBytes { connection.sendData(streamID, $0, endStream: true) } }
        if unconsumed > 0 { connection.consume(streamID, unconsumed); unconsumed = 0 }
        if !pendingBody.isEmpty { connection.consume(streamID, pendingBody.count); pendingBody = [] }
        finish()
    }

    private func finish() {
        guard !finished, let ex = exchange else { return }
        finished = true
        stopBodyTimer()
        worker.record(ex)
    }

    /// The client reset the stream or the connection went away.
    func cancelled() {
        stopBodyTimer()
        guard let ex = exchange else { return }
        ex.upstream?.abandon()
        ex.upstream = nil
        if !finished {
            // nginx's convention for "the client closed the request before the answer".
            if ex.status == 0 { ex.status = 499 }
            finish()
        }
    }
}
