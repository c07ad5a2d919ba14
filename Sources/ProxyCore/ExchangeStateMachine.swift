import HTTPWire

/// The lifecycle of one `Exchange` as a value: events in, one action out. No socket, no loop, no clock, no
/// allocation: the machine is stored inline in its `Exchange`, which feeds it every event (from the adapter, the App
/// Check step, the upstream connection, the deadlines) and performs the action it returns. Each state carries the data
/// that only it needs: the request head while it may still be written (admission, a built-in handler reading its
/// body, a request that may be sent again on a fresh connection), the upstream channel while one carries the request
/// (`Upstream`: `UpstreamChannel` in the gateway, a stand-in in the table tests), and the gateway's own answer from the
/// event that chose it to the action that writes it (`Answer`). So an impossible combination (an
/// upstream held after the exchange ended, a response head while the App Check step decides, a retry after a body
/// byte went out, a request body after its end) cannot be written down, and what an action works on comes with it:
/// the driver keeps no copy to clear by hand. An event that cannot happen in a state is a `preconditionFailure`; an
/// event that arrives after the exchange ended (a late App Check answer, a timer, body bytes still being decoded) is
/// `.none`.
///
/// The machine moves to its new state before it returns the action, so whatever the driver's action calls back into
/// (an adapter closing its connection while the exchange cuts a response) already finds the exchange in its new
/// state.
public struct ExchangeStateMachine<Upstream, Answer> {
    /// The client's request body, as far as the exchange is concerned.
    public enum RequestBody: Equatable, Sendable {
        /// More body is to come. `held`: the client's input is paused until the exchange resumes it: from the head
        /// until the body is wanted (admission and the App Check step decide; an HTTP/1.1 adapter reads no body
        /// then, an HTTP/2 stream's DATA is kept and not acknowledged), and while the upstream connection's send
        /// buffer is above `Backpressure.highWater`.
        case streaming(held: Bool)
        /// The body is complete, or there was none.
        case complete
    }

    /// How an exchange ended.
    public enum Ending: Equatable, Sendable {
        /// The upstream's response went out whole (a WebSocket tunnel: both directions closed).
        case completed
        /// The gateway answered itself (an error or refusal, or a built-in handler's response).
        case answered
        /// Part of the response had gone out and it was cut.
        case cut
        /// The client went away (the end of its byte stream, or its connection failed): 499 `client_closed`.
        case clientClosed
        /// The gateway closed the connection under the exchange (a protocol error, shutdown, a stream reset).
        case connectionClosed
    }

    public enum State {
        /// A request that could not be parsed (no head): only the gateway's answer, or the connection's end, follows.
        case refusing
        /// The head is in: admission and the App Check step decide. Body bytes that arrive meanwhile (HTTP/2) are
        /// held, not refused; the body is always `held` here.
        case admitting(RequestBody, HTTPRequestHead)
        /// A built-in handler reads its request body; the head is handed over with the body (`runBuiltin`).
        case builtinBody(HTTPRequestHead)
        /// A built-in handler works on the complete request.
        case builtinWaiting
        /// The upstream request head is written and an upstream channel is being acquired: `upstreamConnected` or
        /// `upstreamFailed` follows within the same call. `retry`: the head, kept for a body-less request of a method
        /// other than POST and PATCH that has not been retried, so a stale pooled connection may be replaced once.
        case connecting(RequestBody, retry: HTTPRequestHead?)
        /// The request goes to `Upstream`; no response head yet. `retry` as in `connecting`.
        case forwarding(RequestBody, retry: HTTPRequestHead?, Upstream)
        /// The upstream's response head went to the client; its body streams.
        case streamingResponse(RequestBody, Upstream)
        /// The upstream answered a WebSocket handshake `101`: the tunnel relay owns both connections and carries
        /// the bytes; the exchange waits for its end to record it.
        case tunnel
        case done(Ending)
    }

    /// Every input of the machine (the table tests drive it through `handle(_:)`; the driver calls the methods).
    public enum Event {
        /// `count` request body bytes (de-chunked for HTTP/1.1, a DATA payload for HTTP/2).
        case bodyPart(count: Int)
        case bodyEnd
        /// The client went away.
        case clientClosed
        /// The gateway closed the connection (or the client reset the HTTP/2 stream).
        case connectionClosed
        /// The route's App Check step let the request through (verified, monitored, skipped).
        case appCheckPassed
        /// A built-in handler takes the request (`maxBodyBytes` and its early refusals checked by the driver).
        case builtinChosen
        /// The gateway answers itself (admission refusal, App Check refusal, built-in response, framing error).
        /// `close`: the connection must close after it whatever the body's state. Boxed (`indirect`): the answer is
        /// rare and the event is passed by value on every path.
        indirect case answer(Answer, close: Bool)
        /// An upstream channel took the request head; `backlog`: bytes in its send buffer after the held body.
        case upstreamConnected(Upstream, backlog: Int)
        /// A forwarded body part left `backlog` bytes in the upstream connection's send buffer.
        case upstreamBacklog(Int)
        /// The upstream connection's send buffer drained below `Backpressure.lowWater`.
        case upstreamDrained
        case upstreamHead(HTTPResponseHead, ResponseBodyFraming)
        /// The upstream answered the WebSocket handshake `101`.
        case upstreamUpgraded(HTTPResponseHead)
        case upstreamPart
        case upstreamEnd
        case upstreamFailed(UpstreamFailure)
        /// The WebSocket tunnel ended (both directions closed, or its idle bound).
        case tunnelClosed
        /// The client's body-gap deadline (`body_timeout`) expired.
        case deadline
    }

    /// What the driver does; one per event. Terminal actions (`answer`, `answerUpstreamFailure`, `answerTimeout`,
    /// `cutResponse`, `finishResponse`, `cancel`, `finishTunnel`) include recording the exchange (its log line and
    /// metrics); the ones that carry an `abandon` channel close it first (an HTTP/1.1 connection closes, an HTTP/2
    /// stream is reset: never pooled mid-exchange). A failed upstream is not abandoned: it is gone already.
    public enum Action {
        /// Nothing (also the answer to a late event after the exchange ended).
        case none
        /// Keep the body bytes until the request is forwarded; the client's input pauses.
        case holdPart
        /// Send the body bytes to the upstream, then report `upstreamBacklog`.
        case forwardPart(Upstream)
        /// Add the body bytes to the built-in handler's request (its body budget permitting).
        case bufferBuiltinPart
        /// The body outgrew `maxBodyBytes`: answer 413 (or the built-in handler's words) and close.
        case refuseTooLarge
        /// The client's input pauses until `.resumeInput`.
        case pauseInput
        /// The client's input resumes (the upstream took the held body).
        case resumeInput
        /// The request body is complete: end it upstream (the last chunk; the response deadline starts).
        case endRequestBody(Upstream)
        /// The client's body is wanted now (a built-in handler's, or after the upstream took the head and what was
        /// held): `100 Continue` first when owed, then the client's input resumes unless the upstream's send buffer
        /// is still above `highWater` (then `upstreamDrained` resumes it).
        case wantBody(sendContinue: Bool, resumeInput: Bool)
        /// Hand the complete request to the built-in handler.
        case runBuiltin(HTTPRequestHead)
        /// Write the upstream request head and acquire an upstream channel (`upstreamConnected` or
        /// `upstreamFailed` follows).
        case forward(HTTPRequestHead)
        /// The pooled connection was stale: write the head again and acquire a fresh connection.
        case retry(HTTPRequestHead)
        /// Write the upstream's response head to the client.
        case writeHead(HTTPResponseHead, ResponseBodyFraming)
        /// Relay the `101` and hand the client's connection and this upstream connection to a tunnel.
        case openTunnel(Upstream, HTTPResponseHead)
        /// Write response body bytes to the client.
        case writePart
        /// The response is complete. `requestComplete`: the request body was read whole (else an HTTP/1.1
        /// connection must close).
        case finishResponse(requestComplete: Bool)
        /// Write the gateway's own complete answer; `close`: the connection closes after it. Boxed, as the event.
        indirect case answer(Answer, close: Bool, abandon: Upstream?)
        /// Answer the upstream's failure (502, 503 or 504 by its kind).
        case answerUpstreamFailure(UpstreamFailure, close: Bool)
        /// Answer 408 `body_timeout` and close.
        case answerTimeout(abandon: Upstream?)
        /// Cut the response that has started (reset the stream, or close the HTTP/1.1 connection). `answer`: the
        /// gateway's answer that came too late to be written (a gRPC call's deadline ends the call with its trailers).
        indirect case cutResponse(abandon: Upstream?, answer: Answer?)
        /// Stop: nothing more goes to the client (499 unless a status was chosen).
        case cancel(abandon: Upstream?)
        /// The tunnel is over: record the exchange.
        case finishTunnel
        /// The deadline fired while the client is not the one stalling (input held): run it again from now.
        case deferDeadline
    }

    public private(set) var state: State
    /// Request body bytes received so far, and the most the route or handler allows.
    public private(set) var bodyReceived: Int64 = 0
    public var maxBodyBytes: Int64 = 0
    /// `Expect: 100-continue` came with a body: `100 Continue` is owed once the body is wanted (RFC 9110 §10.1.1).
    /// Sent at most once: the body is wanted once (a retry is only for a body-less request).
    public let expectContinue: Bool
    /// The method may be sent twice (neither POST nor PATCH).
    public let retryableMethod: Bool
    public let highWater: Int

    /// The head arrived. `bodyFollows`: false when the request has no body.
    public init(head: HTTPRequestHead, bodyFollows: Bool, highWater: Int = Backpressure.highWater) {
        state = .admitting(bodyFollows ? .streaming(held: true) : .complete, head)
        expectContinue = head.expectContinue && bodyFollows
        retryableMethod = !HTTPSyntax.isMethod(head.method, "POST") && !HTTPSyntax.isMethod(head.method, "PATCH")
        self.highWater = highWater
    }

    /// A request that could not be parsed: the gateway answers it at once.
    public init(refusing: Void = ()) {
        state = .refusing
        expectContinue = false
        retryableMethod = false
        highWater = Backpressure.highWater
    }

    // MARK: events

    public mutating func handle(_ event: Event) -> Action {
        switch event {
        case .bodyPart(let count): return bodyPart(count)
        case .bodyEnd: return bodyEnd()
        case .clientClosed: return cancel(.clientClosed)
        case .connectionClosed: return cancel(.connectionClosed)
        case .appCheckPassed: return appCheckPassed()
        case .builtinChosen: return builtinChosen()
        case .answer(let a, let close): return answer(a, close: close)
        case .upstreamConnected(let up, let backlog): return upstreamConnected(up, backlog: backlog)
        case .upstreamBacklog(let backlog): return upstreamBacklog(backlog)
        case .upstreamDrained: return upstreamDrained()
        case .upstreamHead(let head, let framing): return upstreamHead(head, framing: framing)
        case .upstreamUpgraded(let head): return upstreamUpgraded(head)
        case .upstreamPart: return upstreamPart()
        case .upstreamEnd: return upstreamEnd()
        case .upstreamFailed(let kind): return upstreamFailed(kind)
        case .tunnelClosed: return tunnelClosed()
        case .deadline: return deadline()
        }
    }

    public mutating func bodyPart(_ count: Int) -> Action {
        switch state {
        case .done, .tunnel: return .none
        default: break
        }
        bodyReceived += Int64(count)
        if bodyReceived > maxBodyBytes { return .refuseTooLarge }
        switch state {
        case .admitting(.streaming, _), .connecting(.streaming, _):
            return .holdPart
        case .builtinBody:
            return .bufferBuiltinPart
        case .forwarding(.streaming, _, let up), .streamingResponse(.streaming, let up):
            return .forwardPart(up)
        case .refusing, .admitting(.complete, _), .connecting(.complete, _), .forwarding(.complete, _, _),
             .streamingResponse(.complete, _), .builtinWaiting:
            preconditionFailure("request body after its end")
        case .tunnel, .done:
            return .none
        }
    }

    public mutating func bodyEnd() -> Action {
        switch state {
        case .admitting(.streaming, let head):
            state = .admitting(.complete, head)
            return .none
        case .builtinBody(let head):
            state = .builtinWaiting
            return .runBuiltin(head)
        case .connecting(.streaming, let retry):
            state = .connecting(.complete, retry: retry)
            return .none
        case .forwarding(.streaming, let retry, let up):
            state = .forwarding(.complete, retry: retry, up)
            return .endRequestBody(up)
        case .streamingResponse(.streaming, let up):
            state = .streamingResponse(.complete, up)
            return .endRequestBody(up)
        case .refusing, .admitting(.complete, _), .connecting(.complete, _), .forwarding(.complete, _, _),
             .streamingResponse(.complete, _), .builtinWaiting:
            preconditionFailure("request body ended twice")
        case .tunnel, .done:
            return .none
        }
    }

    /// The connection went away under the exchange. A tunnel is not the exchange's any more: its relay ends it
    /// (`tunnelClosed`).
    public mutating func cancel(_ cause: Ending) -> Action {
        switch state {
        case .done, .tunnel:
            return .none
        case .forwarding(_, _, let up), .streamingResponse(_, let up):
            state = .done(cause)
            return .cancel(abandon: up)
        default:
            state = .done(cause)
            return .cancel(abandon: nil)
        }
    }

    public mutating func appCheckPassed() -> Action {
        switch state {
        case .admitting(let body, let head):
            state = .connecting(body, retry: retryableMethod && body == .complete ? head : nil)
            return .forward(head)
        case .done:
            return .none
        default:
            preconditionFailure("App Check answer outside admission: \(state)")
        }
    }

    /// Admission rewrote the head (a WebSocket handshake's token subprotocol moved into `X-Firebase-AppCheck`): the
    /// App Check step reads it, and it is the one forwarded.
    public mutating func replaceHead(_ head: HTTPRequestHead) {
        guard case .admitting(let body, _) = state else { preconditionFailure("head replaced outside admission: \(state)") }
        state = .admitting(body, head)
    }

    public mutating func builtinChosen() -> Action {
        switch state {
        case .admitting(.complete, let head):
            state = .builtinWaiting
            return .runBuiltin(head)
        case .admitting(.streaming, let head):
            state = .builtinBody(head)
            return .wantBody(sendContinue: expectContinue, resumeInput: true)
        case .done:
            return .none
        default:
            preconditionFailure("built-in handler chosen outside admission: \(state)")
        }
    }

    public mutating func answer(_ answer: Answer, close: Bool) -> Action {
        switch state {
        case .refusing:
            state = .done(.answered)
            return .answer(answer, close: close, abandon: nil)
        case .admitting(let body, _), .connecting(let body, _):
            state = .done(.answered)
            return .answer(answer, close: close || body != .complete, abandon: nil)
        case .forwarding(let body, _, let up):
            state = .done(.answered)
            return .answer(answer, close: close || body != .complete, abandon: up)
        case .builtinBody:
            state = .done(.answered)
            return .answer(answer, close: true, abandon: nil)
        case .builtinWaiting:
            state = .done(.answered)
            return .answer(answer, close: close, abandon: nil)
        case .streamingResponse(_, let up):
            state = .done(.cut)
            return .cutResponse(abandon: up, answer: answer)
        case .tunnel, .done:
            return .none
        }
    }

    public mutating func upstreamConnected(_ up: Upstream, backlog: Int) -> Action {
        switch state {
        case .connecting(.complete, let retry):
            state = .forwarding(.complete, retry: retry, up)
            return .endRequestBody(up)
        case .connecting(.streaming(let held), let retry):
            // Held since the head; what arrived meanwhile went out with the head.
            let resume = held && backlog <= highWater
            state = .forwarding(.streaming(held: held && !resume), retry: retry, up)
            return .wantBody(sendContinue: expectContinue, resumeInput: resume)
        case .done:
            return .none
        default:
            preconditionFailure("upstream connected outside connecting: \(state)")
        }
    }

    public mutating func upstreamBacklog(_ backlog: Int) -> Action {
        guard backlog > highWater else { return .none }
        switch state {
        case .forwarding(.streaming(held: false), let retry, let up):
            state = .forwarding(.streaming(held: true), retry: retry, up)
            return .pauseInput
        case .streamingResponse(.streaming(held: false), let up):
            state = .streamingResponse(.streaming(held: true), up)
            return .pauseInput
        case .forwarding(.streaming(held: true), _, _), .streamingResponse(.streaming(held: true), _), .tunnel, .done:
            return .none
        default:
            preconditionFailure("upstream backlog without a body being forwarded: \(state)")
        }
    }

    /// Comes after every write that leaves the upstream's send buffer low, whatever the state: only a held body
    /// is resumed.
    public mutating func upstreamDrained() -> Action {
        switch state {
        case .forwarding(.streaming(held: true), let retry, let up):
            state = .forwarding(.streaming(held: false), retry: retry, up)
            return .resumeInput
        case .streamingResponse(.streaming(held: true), let up):
            state = .streamingResponse(.streaming(held: false), up)
            return .resumeInput
        default:
            return .none
        }
    }

    public mutating func upstreamHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming) -> Action {
        switch state {
        case .forwarding(let body, _, let up):
            state = .streamingResponse(body, up)
            return .writeHead(head, framing)
        case .done:
            return .none
        default:
            preconditionFailure("upstream response head outside forwarding: \(state)")
        }
    }

    /// Only a handshake's connection reports it (the driver asked for the upgrade: a body-less GET on HTTP/1.1).
    public mutating func upstreamUpgraded(_ head: HTTPResponseHead) -> Action {
        switch state {
        case .forwarding(_, _, let up):
            state = .tunnel
            return .openTunnel(up, head)
        case .done:
            return .none
        default:
            preconditionFailure("upstream upgrade outside forwarding: \(state)")
        }
    }

    public mutating func upstreamPart() -> Action {
        switch state {
        case .streamingResponse: return .writePart
        case .done: return .none
        default: preconditionFailure("upstream response body before its head: \(state)")
        }
    }

    public mutating func upstreamEnd() -> Action {
        switch state {
        case .streamingResponse(let body, _):
            state = .done(.completed)
            return .finishResponse(requestComplete: body == .complete)
        case .done:
            return .none
        default:
            preconditionFailure("upstream response end before its head: \(state)")
        }
    }

    public mutating func upstreamFailed(_ kind: UpstreamFailure) -> Action {
        switch state {
        case .connecting(let body, let retry), .forwarding(let body, let retry, _):
            if let head = retry, kind.isRetryable {
                state = .connecting(body, retry: nil)
                return .retry(head)
            }
            state = .done(.answered)
            return .answerUpstreamFailure(kind, close: body != .complete)
        case .streamingResponse:
            // Part of the response is out already: all that can be done is to cut it.
            state = .done(.cut)
            return .cutResponse(abandon: nil, answer: nil)
        case .done:
            return .none
        default:
            preconditionFailure("upstream failure without an upstream: \(state)")
        }
    }

    public mutating func tunnelClosed() -> Action {
        switch state {
        case .tunnel:
            state = .done(.completed)
            return .finishTunnel
        case .done:
            return .none
        default:
            preconditionFailure("tunnel end without a tunnel: \(state)")
        }
    }

    /// `body_timeout`: the longest gap between two body reads. It does not count while the client's input is held
    /// (the App Check step decides, or the upstream is not taking the body): the client is not the one stalling.
    public mutating func deadline() -> Action {
        switch state {
        case .admitting(.streaming, _), .connecting(.streaming, _), .forwarding(.streaming(held: true), _, _),
             .streamingResponse(.streaming(held: true), _):
            return .deferDeadline
        case .builtinBody:
            state = .done(.answered)
            return .answerTimeout(abandon: nil)
        case .forwarding(.streaming(held: false), _, let up):
            state = .done(.answered)
            return .answerTimeout(abandon: up)
        case .streamingResponse(.streaming(held: false), let up):
            state = .done(.cut)
            return .cutResponse(abandon: up, answer: nil)
        case .refusing, .admitting(.complete, _), .connecting(.complete, _), .forwarding(.complete, _, _),
             .streamingResponse(.complete, _), .builtinWaiting, .tunnel, .done:
            return .none
        }
    }
}

extension ExchangeStateMachine: Sendable where Upstream: Sendable, Answer: Sendable {}
extension ExchangeStateMachine.State: Sendable where Upstream: Sendable, Answer: Sendable {}
extension ExchangeStateMachine.Event: Sendable where Upstream: Sendable, Answer: Sendable {}
extension ExchangeStateMachine.Action: Sendable where Upstream: Sendable, Answer: Sendable {}
extension ExchangeStateMachine.State: Equatable where Upstream: Equatable, Answer: Equatable {}
extension ExchangeStateMachine.Event: Equatable where Upstream: Equatable, Answer: Equatable {}
extension ExchangeStateMachine.Action: Equatable where Upstream: Equatable, Answer: Equatable {}
