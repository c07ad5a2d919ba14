import ProxyCore
import EventLoop
import HTTPWire

/// The exchange's built-in handler side (the issuer): the body read whole within the process's budget, the handler's
/// answer, and the client address its limits are charged to.
extension Exchange {
    func runBuiltin() {
        guard let handler = builtin else { return }
        let request = BuiltinRequest(method: method, path: path, headers: head?.headers ?? HTTPHeaders(),
                                     body: builtinBody, requestId: requestId, client: builtinClient,
                                     target: head?.target ?? path, scheme: responder?.scheme ?? "http",
                                     peerTrusted: responder?.peerTrusted ?? false)
        builtinBody = []
        head = nil
        handler.handle(request) { [weak self] response in
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
        if let response = builtin?.answer(refusal) {
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
        guard count > 0 else { return nil }
        let shared = context.shared
        guard shared.builtinBodyShares.reserve(count, for: builtinClient, limit: BuiltinBodyBudget.perAddress) else {
            return .addressBodyBudgetSpent
        }
        guard shared.builtinBodyBytes.reserve(count) else {
            shared.builtinBodyShares.release(count, for: builtinClient)
            return .bodyBudgetSpent
        }
        builtinBodyReserved += count
        return nil
    }

    func releaseBuiltinBody() {
        if let timer = builtinRateTimer {
            context.loop.cancel(timer)
            builtinRateTimer = nil
        }
        guard builtinBodyReserved > 0 else { return }
        let shared = context.shared
        shared.builtinBodyShares.release(builtinBodyReserved, for: builtinClient)
        let trim = shared.builtinBodyBytes.release(builtinBodyReserved)
        builtinBodyReserved = 0
        builtinBody = []
        if trim { context.scheduleMemoryTrim() }
    }

    /// Holds the body now asked for to `BuiltinBodyBudget`'s minimum rate (issue 39: a trickle below
    /// `body_timeout` kept its reservation for as long as the client liked).
    func startBuiltinRateTimer() {
        builtinBodyStart = context.loop.now
        let timer = LoopTimer { [weak self] in self?.checkBuiltinBodyRate() }
        builtinRateTimer = timer
        context.loop.schedule(timer, at: builtinBodyStart + BuiltinBodyBudget.rateGraceNS)
    }

    /// The rate timer fired: 408 and close when the body is behind the minimum rate, else wait until it would be.
    private func checkBuiltinBodyRate() {
        guard case .builtinBody = machine.state, let timer = builtinRateTimer else { return }
        let allowed = BuiltinBodyBudget.rateGraceNS
            + UInt64(max(0, machine.bodyReceived)) * 1_000_000_000 / BuiltinBodyBudget.minimumBytesPerSecond
        let deadline = builtinBodyStart + allowed
        if case .early(let at) = RequestDeadlines.expiry(of: deadline, now: context.loop.now) {
            context.loop.schedule(timer, at: at)
            return
        }
        builtinRateTimer = nil
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
