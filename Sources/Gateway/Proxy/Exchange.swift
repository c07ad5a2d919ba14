import ProxyCore
import EventLoop
import HTTPWire

/// One request and its response, whatever the protocol: HTTP/1.1 and HTTP/2 are thin adapters (`ExchangeResponder`)
/// that feed it the request head and body bytes and write what it answers (docs/architecture.md). It owns, in order:
/// admission (limits, path normalisation, built-in handlers, routing), the App Check step (and the replay check
/// inside it), dispatch to a built-in handler or the route's upstream, forwarding with the one safe retry on a stale
/// pooled connection, the gateway's own answers (400/404/408/413/502/504 and App Check refusals), and the one
/// access-log line and metrics of the request. Behaviour is therefore defined once: the protocol is a transport
/// detail.
///
/// Its lifecycle is `ExchangeStateMachine`, stored inline: every input (adapter, App Check step, upstream
/// connection, deadline) is fed to the machine as an event, and this class performs the action it returns, in one
/// place (`perform`: talks to the upstream pool, the responder and the loop context). It decides nothing about order
/// or state itself, and keeps no copy of what the machine's states hold (the request head while it may be written,
/// the upstream channel while one carries the request).
package final class Exchange: UpstreamOwner {
    /// The machine, with the gateway's upstream channels and answers.
    typealias Machine = ExchangeStateMachine<any UpstreamChannel, PendingAnswer>

    // MARK: what the log line and metrics record

    let method: String
    /// The normalised path (never the query: it may hold secrets and is not logged); `-` before it is known.
    private(set) var path = "-"
    /// The request id, written into heads in place (`RequestID`).
    let id: RequestID
    /// Its text, made once on first read (logs, error bodies, HTTP/2 headers).
    private(set) lazy var requestId: String = id.string
    let start: UInt64
    let isHead: Bool
    /// The route that matched, from the runtime the exchange holds (`routeTable`); nil when none matched (also for
    /// built-in handlers).
    var route: CompiledRoute? { @inline(__always) get { routeRef?.value } }
    /// `route`, not retained: the runtime the exchange holds (`routes`, set with it) owns it. Holding it strongly
    /// cost a retain and a release per request, and every read through the computed `routeName`/`mode` another pair.
    private var routeRef: Unretained<CompiledRoute>?
    /// The route (or built-in handler) name for logs and metrics; empty when none matched.
    var routeName: String { route?.name ?? builtin?.handler.name ?? "" }
    /// `!routeName.isEmpty`, without making the string (nor retaining the route).
    var hasRouteName: Bool {
        if let routeRef { return !routeRef.value.name.isEmpty }
        if let builtin { return !builtin.handler.name.isEmpty }
        return false
    }
    /// `X-AppCheck-Status` value and the log fields of the App Check step.
    var appCheck = AppCheckOutcome.skipped
    /// Whether the App Check step decided the request (no outcome is counted when it was answered before).
    private(set) var appCheckStage = AppCheckStage.notReached
    /// `appCheckStage` is `.decided`.
    var appCheckDecided: Bool { if case .decided = appCheckStage { true } else { false } }
    /// The route sets `stream_idle_timeout` (which its upstream channel then keeps): once the response head is out, that
    /// bound replaces the client's `body_timeout` (SPEC §6.1). Read from the route: reading the channel out of the
    /// machine's state copies it.
    var streamsIdle: Bool { route?.streamIdleTimeoutNS != nil }
    /// The route's enforcement when the request arrived (`enforce`, `monitor`, `off`); `off` without a route.
    var mode: String { route?.mode ?? "off" }
    /// The response status; 0 until one is chosen (499 when the client left first).
    var status = 0
    private(set) var upstreamStart: UInt64 = 0
    var upstreamEnd: UInt64 = 0
    /// Extra access-log fields (a built-in handler's), never a secret.
    /// Set by the built-in handler side too (`Exchange+Builtin.swift`).
    var logFields: [(String, String)] = []
    /// The route's upstream pool, once the request is forwarded.
    private(set) var pool: UpstreamPool?

    // MARK: progress

    /// The lifecycle (docs: `ExchangeStateMachine`).
    var machine: Machine
    /// A WebSocket handshake's tunnel, from the request to its end (Exchange+Tunnel.swift); `.none` otherwise.
    var tunnel = ExchangeTunnel.none
    /// A gRPC call (set by the HTTP/2 adapter before `begin`; Exchange+GRPC.swift); nil for any other request.
    var grpc: GRPCCall?

    /// The exchange is over (answered, completed, cut or cancelled) and has been recorded.
    var finished: Bool { machine.isDone }
    /// No more request body is wanted (there was none, its end arrived, or the exchange is over).
    var bodyEnded: Bool { machine.requestComplete }
    /// A response head (the upstream's or our own) has gone to the client.
    var headSent: Bool { machine.responseStarted }
    /// Cancelled because the client went away; logged with `outcome` and `reason` `client_closed`.
    var closedByClient: Bool { machine.ending == .clientClosed }

    /// Not retained (a retain per request of a connection that has a side table is measurable): every adapter
    /// outlives its exchange's use of it, because it cancels the exchange (`cancel()`, which drops this) before it
    /// goes away, and a finished exchange drops it too.
    ///
    /// The one stored `unowned(unsafe)` outside `Unretained` (which cannot hold a protocol type; `TunnelRelay` has two
    /// local ones): read on every response part, it costs no reference counting; debug builds check it through a weak
    /// twin, as `Unretained` does.
    var responder: ExchangeResponder? {
        @inline(__always) get {
            #if DEBUG
            precondition(responderStorage == nil || responderCheck != nil, "Exchange: its responder was freed")
            #endif
            return responderStorage
        }
        set {
            responderStorage = newValue
            #if DEBUG
            responderCheck = newValue
            #endif
        }
    }
    private unowned(unsafe) var responderStorage: ExchangeResponder?
    #if DEBUG
    private weak var responderCheck: AnyObject?
    #endif
    /// The loop's context outlives the exchange (`Unretained`: no reference-count traffic per access).
    private let contextRef: Unretained<LoopEnvironment>
    var context: LoopEnvironment { @inline(__always) get { contextRef.value } }
    /// The parsed target, kept only when it differs from the head's own (normalised, a query, absolute form): the
    /// usual target is `head.target` as it is, and keeping a copy cost a copy and a destroy of the optional per request.
    /// Kept for the exchange's life (a retry writes it again): a few short strings, and only when it differs.
    private(set) var target: RequestTarget?
    /// The runtime `route` belongs to (held: a reload may replace the loop's runtime while the exchange waits for
    /// its App Check answer, which reads this runtime's policies).
    private var routes: Runtime?
    /// `routes`, read by the loop's per-route counters.
    var routeTable: Runtime? { routes }
    /// The upstream side of the seam while it carries the request: an HTTP/1.1 connection or an HTTP/2 stream
    /// (`UpstreamChannel`), held by the machine's state.
    var upstream: UpstreamChannel? { machine.upstream }
    /// The client address `pool` counts this request under (`max_upstream_requests_per_address`), once admitted.
    private var upstreamSlot: ConnectionAddressKey?
    /// The request body goes upstream chunked (it came chunked: HTTP/1.1 `Transfer-Encoding: chunked`, or an
    /// HTTP/2 request without `content-length`); else as received. Fixed by the head.
    private let chunkedUpstream: Bool
    /// Trailers (Exchange+Upstream.swift): whether the client takes response trailers; the request's; the response's.
    let acceptsTrailers: Bool
    var requestTrailers: HTTPHeaders?
    var responseTrailers: HTTPHeaders?
    /// Body bytes that arrived while the App Check step decided (HTTP/2; bounded by the stream's window).
    private var pendingBody: [UInt8] = []
    /// A built-in handler's request (Exchange+Builtin.swift); nil for a routed request.
    var builtin: BuiltinCall?

    /// Starts an exchange for a complete request head; `bodyFollows` is false when the request has no body
    /// (HTTP/1.1 framing `none`; an HTTP/2 HEADERS frame with END_STREAM).
    init(head: HTTPRequestHead, bodyFollows: Bool, context: LoopEnvironment, responder: ExchangeResponder) {
        self.contextRef = Unretained(context)
        responderStorage = responder
        method = head.method
        isHead = HTTPSyntax.isMethod(head.method, "HEAD")
        id = context.recorder.requestID(from: head.headers)
        start = context.loop.now
        machine = Machine(head: head, bodyFollows: bodyFollows)
        acceptsTrailers = Self.acceptsTrailers(head)
        if case .chunked = head.framing { chunkedUpstream = true } else { chunkedUpstream = false }
        #if DEBUG
        responderCheck = responder
        #endif
    }

    /// An exchange for a request that could not be parsed (no head): the responder answers at once.
    init(malformedWith requestId: String? = nil, context: LoopEnvironment, responder: ExchangeResponder) {
        self.contextRef = Unretained(context)
        responderStorage = responder
        method = "-"
        isHead = false
        id = requestId.map { RequestID(client: $0) } ?? context.recorder.newRequestID()
        start = context.loop.now
        machine = Machine(refusing: ())
        acceptsTrailers = false
        chunkedUpstream = false
        #if DEBUG
        responderCheck = responder
        #endif
    }

    // MARK: request

    /// Admission, then the App Check step or a built-in handler. May answer (and finish) before returning.
    func begin() {
        guard case .admitting(_, let head) = machine.state else { return }
        // The runtime read once: each read of the loop's is a retain and a release.
        let runtime = context.runtime
        switch RequestAdmission.prepare(head, runtime: runtime, builtins: context.builtins) {
        case .refused(let refusal):
            path = refusal.path
            if let route = refusal.route { useRoute(route, of: runtime) }
            respondError(status: refusal.status, code: refusal.code, reason: refusal.reason,
                         close: refusal.status == 400 || refusal.status == 413)
        case .builtin(let target, let handler):
            path = target.path
            let call = BuiltinCall(handler: handler, client: clientAddressKey(head))
            builtin = call
            machine.maxBodyBytes = Int64(handler.maxBodyBytes)
            var declared = 0
            if case .contentLength(let n) = head.framing {
                guard n <= machine.maxBodyBytes else {
                    builtinRefused(.bodyTooLarge)
                    return
                }
                declared = Int(n)
            }
            if let early = handler.refuseEarly(method: method, path: path, declaredBodyBytes: declared, client: call.client) {
                builtinAnswered(early, close: false)
                return
            }
            if !machine.requestComplete {
                if let refusal = reserveBuiltinBody(declared) {
                    builtinRefused(refusal)
                    return
                }
                call.body.reserveCapacity(declared)
                startBuiltinRateTimer()
            }
            // Chosen within the head's own event: no body byte can have arrived yet.
            perform(machine.builtinChosen())
        case .admitted(let target, let route):
            path = target.path
            if target.query != nil || target.absoluteHost != nil || target.path != head.target { self.target = target }
            useRoute(route, of: runtime)
            if refuseGRPCWithoutH2(route) { return }
            // Only routes with `websocket: true` look at the handshake's fields (Exchange+Tunnel.swift).
            if route.websocket {
                switch prepareWebSocket(head, route: route) {
                case .answered: return
                case .unchanged: break
                case .rewritten(let rewritten):
                    check(rewritten, route: route, of: runtime)
                    return
                }
            }
            check(head, route: route, of: runtime)
        }
    }

    /// The App Check step for an admitted request (or none on an `off` route).
    @inline(__always)
    private func check(_ head: HTTPRequestHead, route: CompiledRoute, of runtime: Runtime) {
        // An `off` route skips the step, which would answer the same. Strong capture: the step answers at once on the
        // fast path, or after a bounded wait (key-set refetch, replay store); a weak capture would give every exchange
        // a side table. A cancelled exchange ignores the answer (the machine is done).
        guard route.verifies else {
            appCheckStage = .decided  // `appCheck` is already `.skipped`.
            passed()
            return
        }
        context.appCheck.evaluate(head: head, route: StepRoute(runtime: runtime, route: route),
                                  scheme: responder?.scheme ?? "http", peerTrusted: responder?.peerTrusted ?? false) { decision in
            self.admitted(decision)
        }
    }

    /// `route` is one of `runtime`'s (the loop's current runtime, which admission routed with).
    private func useRoute(_ route: CompiledRoute, of runtime: Runtime) {
        routes = runtime
        routeRef = Unretained(route)
        machine.maxBodyBytes = route.maxBodyBytes
    }

    /// Takes the decision over (`consuming`): its outcome is swapped into the exchange, not copied (an assignment
    /// copied it, its strings retained, and then destroyed both the decision and the exchange's old outcome).
    private func admitted(_ decision: consuming AppCheckDecision) {
        // A late answer for an exchange cancelled meanwhile changes nothing.
        guard machine.isAdmitting else { return }
        swap(&appCheck, &decision.outcome)
        appCheckStage = .decided
        if let rejection = decision.rejection {
            respondError(status: rejection.status, code: rejection.code, reason: rejection.reason, close: false,
                         retryAfter: rejection.retryAfter, dpopChallenge: rejection.dpopChallenge)
            return
        }
        passed()
    }

    /// The request may go to the upstream.
    private func passed() {
        // Body bytes the adapter already holds (an HTTP/1.1 chunked body) are checked before the upstream sees
        // anything, so a malformed or oversized first chunk is refused without a word to the upstream.
        if let responder, let problem = responder.bufferedBodyProblem(maxBodyBytes: machine.maxBodyBytes) {
            refuseBody(problem)
            return
        }
        perform(machine.appCheckPassed())
    }

    /// Sends the head in `LoopEnvironment.requestHeadBuffer` (written just before, as `written` says) on a pooled or
    /// new connection.
    private func connectUpstream(_ pool: UpstreamPool, _ written: WrittenHead) {
        guard let heavy = pool.admitRequest(&upstreamSlot, of: responder,
                                            limit: context.runtime.maxUpstreamRequestsPerAddress) else {
            upstreamFailed(.addressBusy)
            return
        }
        var upgrade = false
        if case .requested = tunnel { upgrade = true }
        switch pool.acquire(for: self, method: method, heavy: heavy, upgrade: upgrade) {
        case .failure(let kind):
            upstreamFailed(kind)
        case .success(let up):
            if let idle = route?.streamIdleTimeoutNS { up.streamIdleTimeout = idle }
            let out = context.buffers.requestHead
            if case .h2(let draft) = written { up.sendH2Head(out.readable, draft) } else { up.sendHead(out.readable) }
            out.clear()
            if !pendingBody.isEmpty {
                let body = pendingBody
                pendingBody = []
                body.withUnsafeBytes { up.sendBody($0, chunked: chunkedUpstream) }
            }
            perform(machine.upstreamConnected(up, backlog: up.requestBacklog))
        }
    }

    /// Request body bytes (already de-chunked by HTTP/1.1; DATA payloads for HTTP/2). Returns false when the
    /// responder should hold further input until `resumeInput` (the upstream is not keeping up, or the
    /// App Check step is still deciding); true when the bytes are taken (or dropped: the exchange is over).
    @discardableResult
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count > 0 else { return true }
        return perform(machine.bodyPart(bytes.count), part: bytes)
    }

    /// The request body is complete.
    func receiveEnd() { perform(machine.bodyEnd()) }

    /// The request body stopped arriving for `body_timeout`: 408 if nothing of the response went out, else the
    /// response is cut. Either way the upstream connection (holding a partial request) is closed. False when the
    /// deadline does not count now (the client's input is held): the adapter runs it again from now.
    @discardableResult
    func bodyTimedOut() -> Bool { perform(machine.deadline()) }

    /// The connection went away under the exchange (client gone, stream reset, connection closed): nothing more is
    /// sent, the upstream connection is closed (never pooled), and the request is logged with status 499 (nginx's
    /// "client closed request") unless a response was already chosen; `.clientClosed` also logs `client_closed`.
    func cancel(_ cause: Cancellation = .connectionClosed) {
        let action = machine.cancel(cause == .clientClosed ? .clientClosed : .connectionClosed)
        responder = nil
        perform(action)
    }

    // MARK: the machine's actions

    /// Performs what the machine decided: every action of the exchange goes through here. `part`: the body bytes of
    /// the event that chose it (`bodyPart`, `upstreamPart`). Returns whether whoever delivered the event may deliver
    /// more now: the client, for a request body part (false: its input is held until `resumeInput`); the upstream,
    /// for a response head or part (false: the client's send buffer is full until `clientDrained`); the deadline, for
    /// `body_timeout` (false: it did not count, the client's input being held: run it again from now); true otherwise.
    ///
    /// The response's own actions (a part, the head) are taken here, inline where the event came in: they come with
    /// every response, and a call into the whole switch cost ~70 instructions each. Every other action is
    /// `performRest`'s, the rest of this one switch.
    @inline(__always) @discardableResult
    func perform(_ action: Machine.Action,
                 part: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)) -> Bool {
        switch action {
        case .none:
            return true
        case .deferDeadline:
            return false
        case .writePart:
            guard part.count > 0, let responder else { return true }
            return relayPart(part, to: responder)
        case .writeHead(let head, let framing):
            upstreamEnd = context.loop.now
            status = head.status
            guard let responder else { return true }
            return responder.writeHead(head, framing: framing, exchange: self)
        default:
            return performRest(action, part: part)
        }
    }

    /// `perform`'s other actions.
    private func performRest(_ action: Machine.Action, part: UnsafeRawBufferPointer) -> Bool {
        switch action {
        case .none, .deferDeadline, .writePart, .writeHead:
            return perform(action, part: part)
        case .holdPart:
            pendingBody.append(contentsOf: part)
            return false
        case .forwardPart(let up):
            up.sendBody(part, chunked: chunkedUpstream)
            // Held is held, whether this part began it or came after (HTTP/2 delivers the DATA already in flight:
            // each of those parts must stay unacknowledged too, or the client's window reopens).
            return perform(machine.upstreamBacklog(up.requestBacklog)) && !machine.inputHeld
        case .pauseInput:
            return false
        case .bufferBuiltinPart:
            bufferBuiltinPart(part)
        case .refuseTooLarge:
            if builtin != nil { builtinRefused(.bodyTooLarge) } else {
                respondError(status: 413, code: "body_too_large", reason: "body_too_large", close: true)
            }
        case .resumeInput:
            responder?.resumeInput(exchange: self)
        case .endRequestBody(let up):
            up.endRequest(chunked: chunkedUpstream, trailers: requestTrailers)
            requestTrailers = nil
        case .wantBody(let sendContinue, let resume):
            if sendContinue { responder?.sendContinue(exchange: self) }
            if resume { responder?.resumeInput(exchange: self) }
        case .runBuiltin(let head):
            runBuiltin(head)
        case .forward(let head):
            // Admission chose the route before the App Check step, and the responder stays until the machine is done.
            guard let route, let responder else { preconditionFailure("Exchange: forwarded without a route or responder") }
            let pool = context.pools[route.upstreamIndex]
            self.pool = pool
            let written = writeRequestHead(head, route: route, pool: pool, responder: responder)
            if case .unsafe = written {
                respondError(status: 400, code: "bad_request", reason: "unsafe_header_value", close: true)
                break
            }
            upstreamStart = context.loop.now
            connectUpstream(pool, written)
        case .retry(let head):
            guard let route, let pool, let responder else { preconditionFailure("Exchange: retried without an upstream") }
            let written = writeRequestHead(head, route: route, pool: pool, responder: responder)
            if case .unsafe = written {
                perform(machine.upstreamFailed(.staleConnection))
                break
            }
            connectUpstream(pool, written)
        case .openTunnel(let up, let head):
            openTunnel(up, head: head)
        case .finishResponse(let requestComplete):
            responder?.writeEnd(requestComplete: requestComplete, exchange: self)
            finish()
        case .answer(let answer, let close, let up):
            up?.abandon()
            writeAnswer(answer, close: close)
        case .answerUpstreamFailure(let kind, let close):
            if UpstreamDeadlines.isGatewayTimeout(kind) {
                writeAnswer(errorAnswer(status: 504, code: "upstream_timeout", reason: kind.rawValue), close: close)
            } else if kind == .connectRateLimited || kind == .addressBusy {
                writeAnswer(errorAnswer(status: 503, code: "upstream_busy", reason: kind.rawValue, retryAfter: 1),
                            close: close)
            } else {
                writeAnswer(errorAnswer(status: 502, code: "upstream_unavailable", reason: kind.rawValue), close: close)
            }
        case .answerTimeout(let up):
            up?.abandon()
            writeAnswer(errorAnswer(status: 408, code: "request_timeout", reason: "body_timeout"), close: true)
        case .cutResponse(let up, let answer):
            up?.abandon()
            if let answer, let trailers = answer.trailersOnceStarted {
                grpc?.status = answer.grpcStatus
                responder?.endGRPCCall(trailers, exchange: self)
            } else {
                responder?.abortResponse(exchange: self)
            }
            finish()
        case .cancel(let up):
            up?.abandon()
            leaveUpstreamSlot()
            releaseBuiltinBody()
            pendingBody = []
            if status == 0 { status = 499 }
            context.recorder.record(self)
        case .finishTunnel:
            context.recorder.record(self)
        }
        return true
    }

    /// Gives back the request's count at its upstream (`max_upstream_requests_per_address`): when the exchange
    /// finishes, or when its WebSocket handshake became a tunnel (which then counts as a connection only).
    func leaveUpstreamSlot() {
        guard let key = upstreamSlot else { return }
        upstreamSlot = nil
        pool?.leave(key)
    }

    func finish() {
        leaveUpstreamSlot()
        if !pendingBody.isEmpty { pendingBody = [] }
        releaseBuiltinBody()
        context.recorder.record(self)
        let r = responder
        responder = nil
        r?.exchangeFinished(self)
    }
}
