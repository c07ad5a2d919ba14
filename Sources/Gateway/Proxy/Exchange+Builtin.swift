import ProxyCore
import EventLoop
import HTTPWire

/// The exchange's built-in handler side (the issuer): the body read whole within the process's budget, the handler's
/// answer, and the client address its limits are charged to.
extension Exchange {
    /// The `runBuiltin` action: the complete request goes to the handler.
    func runBuiltin(_ head: HTTPRequestHead) {
        guard let call = builtin else { preconditionFailure("Exchange: a built-in request without its handler") }
        let request = BuiltinRequest(method: method, path: path, headers: head.headers,
                                     body: call.body, requestId: requestId, client: call.client,
                                     target: head.target, scheme: responder?.scheme ?? "http",
                                     peerTrusted: responder?.peerTrusted ?? false)
        call.body = []
        call.handler.handle(request) { [weak self] response in
            guard let self, case .builtinWaiting = self.machine.state else { return }
            self.builtinAnswered(response, close: false)
        }
    }

    func builtinAnswered(_ response: BuiltinResponse, close: Bool) {
        guard !machine.isDone else { return }
        logFields = response.logFields
        answer(PendingAnswer(status: response.status, headers: response.headers, body: response.body), close: close)
    }

    /// A refusal of the exchange's own, in the handler's words when it has them; the connection closes (the body
    /// is not read).
    func builtinRefused(_ refusal: BuiltinRefusal) {
        if let response = builtin?.handler.answer(refusal) {
            builtinAnswered(response, close: true)
        } else if case .bodyTooLarge = refusal {
            respondError(status: 413, code: "body_too_large", reason: "body_too_large", close: true)
        } else if case .addressBodyBudgetSpent = refusal {
            respondError(status: 429, code: "overloaded", reason: "builtin_body_address", close: true, retryAfter: 1)
        } else {
            respondError(status: 503, code: "overloaded", reason: "builtin_body_budget", close: true, retryAfter: 1)
        }
    }

    /// Takes `count` more bytes of the client address's share of the built-in body budget, then of the process's;
    /// nil when they fit, else why not (nothing taken).
    func reserveBuiltinBody(_ count: Int) -> BuiltinRefusal? {
        guard count > 0, let call = builtin else { return nil }
        let shared = context.shared
        guard shared.builtinBodyShares.reserve(count, for: call.client, limit: BuiltinBodyBudget.perAddress) else {
            return .addressBodyBudgetSpent
        }
        guard shared.builtinBodyBytes.reserve(count) else {
            shared.builtinBodyShares.release(count, for: call.client)
            return .bodyBudgetSpent
        }
        call.reserved += count
        return nil
    }

    /// The `bufferBuiltinPart` action: the part joins the body, once the budgets took its bytes.
    func bufferBuiltinPart(_ part: UnsafeRawBufferPointer) {
        guard let call = builtin else { return }
        if machine.bodyReceived > Int64(call.reserved),
           let refusal = reserveBuiltinBody(Int(machine.bodyReceived) - call.reserved) {
            builtinRefused(refusal)
            return
        }
        call.body.append(contentsOf: part)
    }

    func releaseBuiltinBody() {
        guard let call = builtin else { return }
        if let timer = call.rateTimer {
            context.loop.cancel(timer)
            call.rateTimer = nil
        }
        guard call.reserved > 0 else { return }
        let shared = context.shared
        shared.builtinBodyShares.release(call.reserved, for: call.client)
        let trim = shared.builtinBodyBytes.release(call.reserved)
        call.reserved = 0
        call.body = []
        if trim { context.scheduleMemoryTrim() }
    }

    /// Holds the body now asked for to `BuiltinBodyBudget`'s minimum rate (issue 39: a trickle below
    /// `body_timeout` kept its reservation for as long as the client liked).
    func startBuiltinRateTimer() {
        guard let call = builtin else { return }
        call.bodyStart = context.loop.now
        let timer = LoopTimer { [weak self] in self?.checkBuiltinBodyRate() }
        call.rateTimer = timer
        context.loop.schedule(timer, at: call.bodyStart + BuiltinBodyBudget.rateGraceNS)
    }

    /// The rate timer fired: 408 and close when the body is behind the minimum rate, else wait until it would be.
    private func checkBuiltinBodyRate() {
        guard case .builtinBody = machine.state, let call = builtin, let timer = call.rateTimer else { return }
        let allowed = BuiltinBodyBudget.rateGraceNS
            + UInt64(max(0, machine.bodyReceived)) * 1_000_000_000 / BuiltinBodyBudget.minimumBytesPerSecond
        let deadline = call.bodyStart + allowed
        if case .early(let at) = RequestDeadlines.expiry(of: deadline, now: context.loop.now) {
            context.loop.schedule(timer, at: at)
            return
        }
        call.rateTimer = nil
        respondError(status: 408, code: "request_timeout", reason: "body_too_slow", close: true)
    }

    /// The `ClientAddressKey` a built-in handler limits this client by: the peer's address, or, when the peer is
    /// one of `trusted_proxies`, the last `X-Forwarded-For` hop (the address that proxy saw; docs/behaviour.md).
    func clientAddressKey(_ head: HTTPRequestHead) -> String {
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
}
