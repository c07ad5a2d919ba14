import EventLoop
import HTTPWire

/// One request and its response, whatever the protocol: HTTP/1.1 and HTTP/2 are thin adapters (`ExchangeResponder`)
/// that feed it the request head and body bytes and write what it answers (docs/architecture.md). It owns, in order:
/// admission (limits, path normalisation, built-in handlers, routing), the App Check step (and the replay check
/// inside it), dispatch to a built-in handler or the route's upstream, forwarding with the one safe retry on a stale
/// pooled connection, the gateway's own answers (400/404/408/413/502/504 and App Check refusals), and the one
/// access-log line and metrics of the request. Behaviour is therefore defined once: the protocol is a transport
/// detail.
final class Exchange: UpstreamOwner {
    // MARK: what the log line and metrics record

    let method: String
    /// The normalised path (never the query: it may hold secrets and is not logged); `-` before it is known.
    private(set) var path = "-"
    let requestId: String
    let start: UInt64
    let isHead: Bool
    /// The route's index in the runtime's table; -1 when none matched (also for built-in handlers).
    private(set) var routeIndex = -1
    /// The route (or built-in handler) name for logs and metrics; empty when none matched.
    private(set) var routeName = ""
    /// `X-AppCheck-Status` value and the log fields of the App Check step.
    var appCheck = AppCheckOutcome.skipped
    /// False when the request was answered before the App Check step ran (no outcome is counted then).
    private(set) var appCheckRan = false
    /// The route's enforcement when the request arrived (`enforce`, `monitor`, `off`).
    private(set) var mode = "off"
    /// The response status; 0 until one is chosen (499 when the client left first).
    private(set) var status = 0
    private(set) var upstreamStart: UInt64 = 0
    private(set) var upstreamEnd: UInt64 = 0
    /// Extra access-log fields (a built-in handler's), never a secret.
    private(set) var logFields: [(String, String)] = []
    private(set) var pool: UpstreamPool?

    // MARK: progress

    /// No more request body will come (there was none, or its end arrived).
    private(set) var bodyEnded: Bool
    private(set) var bodyReceived: Int64 = 0
    private(set) var maxBodyBytes: Int64 = 0
    /// A response head (the upstream's or our own) has gone to the client.
    private(set) var headSent = false
    private(set) var finished = false

    /// `clientClosed`: cancelled because the client went away (the end of its byte stream, or its connection
    /// failed); logged with `outcome` and `reason` `client_closed`.
    enum Stage { case admitting, forwarding, builtinBody, builtinWaiting, answered, clientClosed }

    /// Why an exchange is cancelled before it finished.
    enum Cancellation {
        /// The client went away: the end of its byte stream (EOF, a TLS `close_notify`) or a failed read or write.
        case clientClosed
        /// The gateway closed the connection (a timeout cutting a response, a protocol error, shutdown).
        case connectionClosed
    }
    private(set) var stage = Stage.admitting

    /// Not retained (a retain per request of a connection that has a side table is measurable): every adapter
    /// outlives its exchange's use of it, because it cancels the exchange (`cancel()`, which drops this) before it
    /// goes away, and a finished exchange drops it too.
    private unowned(unsafe) var responder: ExchangeResponder?
    /// The loop's context outlives the exchange.
    unowned(unsafe) let context: LoopContext
    private var head: HTTPRequestHead?
    private var target: RequestTarget?
    /// The runtime whose route table `routeIndex` points into (held: a reload may replace the loop's runtime while
    /// the exchange waits for its App Check answer).
    private var routes: Runtime?
    /// `routes`, read by the loop's per-route counters.
    var routeTable: Runtime? { routes }
    private var upstream: UpstreamConnection?
    /// The request may be sent once more (body-less, neither POST nor PATCH): `head` and `target` are kept for it.
    private var retryable = false
    private var retried = false
    private var chunkedUpstream = false
    /// `Expect: 100-continue` was sent with a body (RFC 9110 §10.1.1): `100 Continue` is owed once the body is wanted.
    private let expectContinue: Bool
    private var continueSent = false
    /// Body bytes that arrived while the App Check step decided (HTTP/2; bounded by the stream's window).
    private var pendingBody: [UInt8] = []
    /// `receiveBody` answered false: the responder holds back input until `requestBodyDrained`.
    private var bodyHeld = false
    private var builtin: BuiltinHandler?
    private var builtinBody: [UInt8] = []
    /// Bytes of `SharedState.builtinBodyBytes` this exchange holds (the built-in body's declared or received size).
    private var builtinBodyReserved = 0
    /// The client's `ClientAddressKey`, for a built-in handler's limits.
    private var builtinClient = ""

    /// Starts an exchange for a complete request head; `bodyFollows` is false when the request has no body
    /// (HTTP/1.1 framing `none`; an HTTP/2 HEADERS frame with END_STREAM).
    init(head: HTTPRequestHead, bodyFollows: Bool, context: LoopContext, responder: ExchangeResponder) {
        self.context = context
        self.responder = responder
        method = head.method
        isHead = head.method == "HEAD"
        requestId = context.requestId(from: head.headers)
        start = context.loop.now
        bodyEnded = !bodyFollows
        expectContinue = head.expectContinue && bodyFollows
        self.head = head
    }

    /// An exchange for a request that could not be parsed (no head): the responder answers at once.
    init(malformedWith requestId: String? = nil, context: LoopContext, responder: ExchangeResponder) {
        self.context = context
        self.responder = responder
        method = "-"
        isHead = false
        self.requestId = requestId ?? context.newRequestId()
        start = context.loop.now
        bodyEnded = true
        expectContinue = false
    }

    /// True while the App Check step is deciding (body bytes are held, not refused).
    var isAdmitting: Bool { stage == .admitting && !finished }

    // MARK: request

    /// Admission, then the App Check step or a built-in handler. May answer (and finish) before returning.
    func begin() {
        guard let head else { return }
        switch RequestAdmission.prepare(head, runtime: context.runtime, builtins: context.builtins) {
        case .refused(let refusal):
            path = refusal.path
            if let index = refusal.routeIndex { useRoute(index) }
            respondError(status: refusal.status, code: refusal.code, reason: refusal.reason,
                         close: !bodyEnded || refusal.status == 400 || refusal.status == 413)
        case .builtin(let target, let handler):
            path = target.path
            routeName = handler.name
            builtin = handler
            maxBodyBytes = Int64(handler.maxBodyBytes)
            var declared = 0
            if case .contentLength(let n) = head.framing {
                guard n <= maxBodyBytes else {
                    builtinRefused(.bodyTooLarge)
                    return
                }
                declared = Int(n)
            }
            builtinClient = clientAddressKey(head)
            if let early = handler.refuseEarly(method: method, path: path, declaredBodyBytes: declared, client: builtinClient) {
                builtinAnswered(early, close: !bodyEnded)
                return
            }
            stage = .builtinBody
            if bodyEnded { runBuiltin(); return }
            guard reserveBuiltinBody(declared) else {
                builtinRefused(.bodyBudgetSpent)
                return
            }
            builtinBody.reserveCapacity(declared)
            sendContinueIfOwed()
            responder?.requestBodyWanted(exchange: self)
        case .admitted(let target, let routeIndex):
            path = target.path
            self.target = target
            useRoute(routeIndex)
            if case .chunked = head.framing { chunkedUpstream = true }
            // The route is read in place from the runtime the exchange holds (copying `RouteSettings` retains each of
            // its fields). Strong capture: the step answers at once on the fast path, or after a bounded wait
            // (key-set refetch, replay store); a weak capture would give every exchange a side table. A cancelled
            // exchange ignores the answer.
            // An `off` route skips the step without handing it the route (a copy of `RouteSettings` retains each
            // of its fields); the step answers the same for it.
            if routes!.routes[routeIndex].enforcement == .off {
                admitted(AppCheckDecision(outcome: .skipped))
                return
            }
            context.appCheck.evaluate(head: head, route: StepRoute(runtime: routes!, index: routeIndex)) { decision in
                guard self.stage == .admitting, !self.finished else { return }
                self.admitted(decision)
            }
        }
    }

    private func useRoute(_ index: Int) {
        let runtime = context.runtime
        routes = runtime
        routeIndex = index
        routeName = runtime.routes[index].name
        mode = runtime.routes[index].enforcement.rawValue
        maxBodyBytes = runtime.routes[index].maxBodyBytes
    }

    private func admitted(_ decision: AppCheckDecision) {
        appCheck = decision.outcome
        appCheckRan = true
        if let rejection = decision.rejection {
            respondError(status: rejection.status, code: rejection.code, reason: rejection.reason, close: !bodyEnded,
                         retryAfter: rejection.retryAfter)
            return
        }
        guard let responder, responder.checkBufferedBody(exchange: self), !finished else { return }
        forward()
    }

    private func forward() {
        guard let responder, let routes, routeIndex >= 0 else { return }
        let pool = context.pool(for: routes.routes[routeIndex].upstreamIndex)
        self.pool = pool
        guard writeRequestHead(responder) else {
            respondError(status: 400, code: "bad_request", reason: "unsafe_header_value", close: true)
            return
        }
        // A body-less request other than POST and PATCH may be sent once more on a fresh connection (the pooled one
        // was stale): its head is written again then, so the head stays; otherwise it is dropped now.
        retryable = method != "POST" && method != "PATCH" && bodyEnded
        if !retryable {
            self.head = nil
            self.target = nil
        }
        stage = .forwarding
        upstreamStart = context.loop.now
        connectUpstream()
    }

    /// Writes the upstream request head into the loop's head buffer (`LoopContext.requestHeadBuffer`), which
    /// `connectUpstream` sends at once. False when a value would carry CR, LF or NUL.
    private func writeRequestHead(_ responder: ExchangeResponder) -> Bool {
        guard let head, let target, let routes, routeIndex >= 0, let pool else { return false }
        let out = context.requestHeadBuffer
        out.clear()
        return RequestHeadWriter.write(
            head: head, target: target, forwardToken: routes.routes[routeIndex].forwardToken,
            enforcement: routes.routes[routeIndex].enforcement, upstream: pool.settings, requestId: requestId,
            appCheck: appCheck, peerIP: responder.peerIP, trusted: responder.peerTrusted, scheme: responder.scheme,
            into: out)
    }

    /// Sends the head in `LoopContext.requestHeadBuffer` (written just before) on a pooled or new connection.
    private func connectUpstream() {
        guard let pool else { return }
        switch pool.acquire(for: self, method: method) {
        case .failure(let kind):
            upstreamFailed(kind)
        case .success(let up):
            upstream = up
            let out = context.requestHeadBuffer
            up.send(out.readable)
            out.clear()
            if !pendingBody.isEmpty {
                let body = pendingBody
                pendingBody = []
                body.withUnsafeBytes { sendBody($0, to: up) }
            }
            if bodyEnded {
                finishRequestBody(up)
            } else {
                sendContinueIfOwed()
                responder?.requestBodyWanted(exchange: self)
            }
            if bodyHeld && up.outBuf.readableCount <= ClientConnection.highWater { upstreamDrained() }
        }
    }

    private func sendContinueIfOwed() {
        guard !continueSent, !bodyEnded, let responder else { return }
        guard expectContinue else { return }
        continueSent = true
        responder.sendContinue(exchange: self)
    }


    /// Request body bytes (already de-chunked by HTTP/1.1; DATA payloads for HTTP/2). Returns false when the
    /// responder should hold further input until `requestBodyDrained` (the upstream is not keeping up, or the
    /// App Check step is still deciding); true when the bytes are taken (or dropped: the exchange is over).
    @discardableResult
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !finished, bytes.count > 0 else { return true }
        bodyReceived += Int64(bytes.count)
        if bodyReceived > maxBodyBytes {
            if builtin != nil { builtinRefused(.bodyTooLarge) } else {
                respondError(status: 413, code: "body_too_large", reason: "body_too_large", close: true)
            }
            return true
        }
        switch stage {
        case .admitting:
            pendingBody.append(contentsOf: bytes)
            bodyHeld = true
            return false
        case .forwarding:
            guard let up = upstream else { return true }
            sendBody(bytes, to: up)
            if up.outBuf.readableCount > ClientConnection.highWater {
                bodyHeld = true
                return false
            }
            return true
        case .builtinBody:
            guard bodyReceived <= Int64(builtinBodyReserved)
                    || reserveBuiltinBody(Int(bodyReceived) - builtinBodyReserved) else {
                builtinRefused(.bodyBudgetSpent)
                return true
            }
            builtinBody.append(contentsOf: bytes)
            return true
        case .builtinWaiting, .answered, .clientClosed:
            return true
        }
    }

    @inline(__always)
    private func sendBody(_ bytes: UnsafeRawBufferPointer, to up: UpstreamConnection) {
        if chunkedUpstream { up.sendChunk(bytes) } else { up.send(bytes) }
    }

    /// The request body is complete.
    func receiveEnd() {
        guard !finished, !bodyEnded else { return }
        bodyEnded = true
        switch stage {
        case .forwarding:
            if let up = upstream { finishRequestBody(up) }
        case .builtinBody:
            runBuiltin()
        case .admitting, .builtinWaiting, .answered, .clientClosed:
            break
        }
    }

    private func finishRequestBody(_ up: UpstreamConnection) {
        if chunkedUpstream { up.sendLastChunk() }
        up.requestComplete()
    }

    /// The request body stopped arriving for `body_timeout`: 408 if nothing of the response went out, else the
    /// response is cut. Either way the upstream connection (holding a partial request) is closed.
    func bodyTimedOut() {
        respondError(status: 408, code: "request_timeout", reason: "body_timeout", close: true)
    }

    /// The request body's framing is broken (HTTP/1.1 chunked syntax, or too large): answered and closed.
    func refuseBody(_ error: HTTPParseError) {
        respondError(status: error.status, code: error.status == 413 ? "body_too_large" : "bad_request",
                     reason: error.reason, close: true)
    }

    /// The connection went away under the exchange (client gone, stream reset, connection closed): nothing more is
    /// sent, the upstream connection is closed (never pooled), and the request is logged with status 499 (nginx's
    /// "client closed request") unless a response was already chosen; `.clientClosed` also logs `client_closed`.
    func cancel(_ cause: Cancellation = .connectionClosed) {
        upstream?.abandon()
        upstream = nil
        responder = nil
        guard !finished else { return }
        finished = true
        stage = cause == .clientClosed ? .clientClosed : .answered
        releaseBuiltinBody()
        if status == 0 { status = 499 }
        context.record(self)
    }

    // MARK: built-in handlers

    private func runBuiltin() {
        guard let handler = builtin, stage == .builtinBody else { return }
        stage = .builtinWaiting
        let request = BuiltinRequest(method: method, path: path, headers: head?.headers ?? HTTPHeaders(),
                                     body: builtinBody, requestId: requestId, client: builtinClient)
        builtinBody = []
        head = nil
        handler.handle(request) { [weak self] response in
            guard let self, self.stage == .builtinWaiting else { return }
            self.builtinAnswered(response)
        }
    }

    private func builtinAnswered(_ response: BuiltinResponse, close: Bool = false) {
        guard !finished else { return }
        logFields = response.logFields
        answer(status: response.status, headers: response.headers, body: response.body, close: close)
    }

    /// A refusal of the exchange's own, in the handler's words when it has them; the connection closes (the body
    /// is not read).
    private func builtinRefused(_ refusal: BuiltinRefusal) {
        if let response = builtin?.answer(refusal) {
            builtinAnswered(response, close: true)
        } else if case .bodyTooLarge = refusal {
            respondError(status: 413, code: "body_too_large", reason: "body_too_large", close: true)
        } else {
            respondError(status: 503, code: "overloaded", reason: "builtin_body_budget", close: true, retryAfter: 1)
        }
    }

    /// Takes `count` more bytes of the process's built-in body budget; false when they do not fit.
    private func reserveBuiltinBody(_ count: Int) -> Bool {
        guard count > 0 else { return true }
        guard let gauge = context.shared?.builtinBodyBytes else { return true }
        guard gauge.reserve(count) else { return false }
        builtinBodyReserved += count
        return true
    }

    private func releaseBuiltinBody() {
        guard builtinBodyReserved > 0, let gauge = context.shared?.builtinBodyBytes else { return }
        let trim = gauge.release(builtinBodyReserved)
        builtinBodyReserved = 0
        builtinBody = []
        if trim { context.scheduleMemoryTrim() }
    }

    /// The `ClientAddressKey` a built-in handler limits this client by: the peer's address, or, when the peer is
    /// one of `trusted_proxies`, the last `X-Forwarded-For` hop (the address that proxy saw; docs/behaviour.md).
    private func clientAddressKey(_ head: HTTPRequestHead) -> String {
        guard let responder else { return "" }
        if responder.peerTrusted {
            var last: Int?
            while let next = head.headers.firstIndex(ofLiteral: "x-forwarded-for", after: last ?? -1) { last = next }
            if let last, let hop = head.headers.value(at: last).split(separator: ",").last,
               let key = ClientAddressKey.key(text: hop) {
                return key
            }
        }
        return ClientAddressKey.key(text: Substring(responder.peerIP)) ?? responder.peerIP
    }

    // MARK: upstream (UpstreamOwner)

    func upstreamResponseHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming) -> Bool {
        guard !finished, let responder else { return true }
        upstreamEnd = context.loop.now
        status = head.status
        headSent = true
        responder.respondHead(head, framing: framing, exchange: self)
        return responder.acceptsResponseBody(exchange: self)
    }

    func upstreamResponseBody(_ data: UnsafeRawBufferPointer) -> Bool {
        guard !finished, data.count > 0, let responder else { return true }
        return responder.respondBody(data, exchange: self)
    }

    func upstreamResponseEnd() {
        guard !finished else { return }
        upstream = nil
        stage = .answered
        responder?.respondEnd(exchange: self)
        finish()
    }

    func upstreamFailed(_ kind: UpstreamFailure) {
        guard !finished else { return }
        upstream = nil
        context.countUpstreamError(self, kind)
        if headSent {
            // Part of the response is out already: all that can be done is to cut it.
            stage = .answered
            responder?.abortResponse(exchange: self)
            finish()
            return
        }
        if kind.isRetryable, !retried, retryable, let responder, writeRequestHead(responder) {
            retried = true
            head = nil
            target = nil
            connectUpstream()
            return
        }
        if kind == .responseTimeout || kind == .connectTimeout {
            respondError(status: 504, code: "upstream_timeout", reason: kind.rawValue, close: !bodyEnded)
        } else if kind == .connectRateLimited {
            respondError(status: 503, code: "upstream_busy", reason: kind.rawValue, close: !bodyEnded, retryAfter: 1)
        } else {
            respondError(status: 502, code: "upstream_unavailable", reason: kind.rawValue, close: !bodyEnded)
        }
    }

    func upstreamDrained() {
        guard bodyHeld, !finished else { return }
        bodyHeld = false
        responder?.requestBodyDrained(exchange: self)
    }

    /// The client's send buffer drained: the upstream may read more of the response.
    func clientDrained() { upstream?.clientDrained() }

    // MARK: answers of our own

    /// An error of the gateway's own (docs/behaviour.md JSON body). After part of a response went out, the
    /// response is cut instead.
    func respondError(status: Int, code: String, reason: String, close: Bool, retryAfter: Int? = nil) {
        guard !finished else { return }
        var headers = [("Content-Type", "application/json")]
        if let retryAfter { headers.append(("Retry-After", String(retryAfter))) }
        // Refused before the App Check step (malformed, too large, timed out): the log line's `reason` says why;
        // a plain 404 (no route) has none.
        if !appCheckRan && appCheck.reason == nil && !(status == 404 && routeIndex < 0) { appCheck.reason = reason }
        answer(status: status, headers: headers,
               body: Array(ErrorResponse.body(code: code, reason: reason, requestId: requestId).utf8), close: close)
    }

    private func answer(status: Int, headers: [(String, String)], body: [UInt8], close: Bool) {
        upstream?.abandon()
        upstream = nil
        stage = .answered
        if headSent {
            responder?.abortResponse(exchange: self)
            finish()
            return
        }
        self.status = status
        headSent = true
        responder?.respondComplete(status: status, headers: headers, body: body, close: close || !bodyEnded,
                                   exchange: self)
        finish()
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        pendingBody = []
        releaseBuiltinBody()
        context.record(self)
        let r = responder
        responder = nil
        r?.exchangeFinished(self)
    }
}

/// The result of the App Check step for one request, as logged and forwarded.
struct AppCheckOutcome {
    /// `X-AppCheck-Status`: verified | missing | invalid | reused | skipped.
    var status: String
    /// Firebase's request category: verified, outdated_client, unknown_origin, invalid, reused, skipped.
    var outcome: String
    var reason: String?
    var appId: String?
    /// First 16 hex chars of SHA-256 of the token, for logs.
    var tokenSHA256: String?

    static let skipped = AppCheckOutcome(status: "skipped", outcome: "skipped")
}
