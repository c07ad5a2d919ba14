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
        } else {
            respondError(status: 503, code: "overloaded", reason: "builtin_body_budget", close: true, retryAfter: 1)
        }
    }

    /// Takes `count` more bytes of the process's built-in body budget; false when they do not fit.
    func reserveBuiltinBody(_ count: Int) -> Bool {
        guard count > 0 else { return true }
        guard let gauge = context.shared?.builtinBodyBytes else { return true }
        guard gauge.reserve(count) else { return false }
        builtinBodyReserved += count
        return true
    }

    func releaseBuiltinBody() {
        guard builtinBodyReserved > 0, let gauge = context.shared?.builtinBodyBytes else { return }
        let trim = gauge.release(builtinBodyReserved)
        builtinBodyReserved = 0
        builtinBody = []
        if trim { context.scheduleMemoryTrim() }
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
