/// The lifecycle of one `Exchange` as a value: events in, one action out. No socket, no loop, no clock, no
/// allocation: the machine is stored inline in its `Exchange`, which feeds it every event (from the adapter, the App
/// Check step, the upstream connection, the deadlines) and performs the action it returns. Each state carries the data
/// that only it needs, so an impossible combination (a response head while the App Check step decides, a retry after
/// a body byte went out, a request body after its end) cannot be written down; an event that cannot happen in a state
/// is a `preconditionFailure`, and an event that arrives after the exchange ended (a late App Check answer, a timer,
/// body bytes still being decoded) is `.none`.
///
/// The machine moves to its new state before it returns the action, so whatever the driver's action calls back into
/// (an adapter closing its connection while the exchange cuts a response) already finds the exchange in its new
/// state.
public struct ExchangeStateMachine: Sendable {
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
        /// The upstream's response went out whole.
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

    public enum State: Equatable, Sendable {
        /// The head is in: admission and the App Check step decide. Body bytes that arrive meanwhile (HTTP/2) are
        /// held, not refused; the body is always `held` here.
        case admitting(RequestBody)
        /// A built-in handler reads its request body.
        case builtinBody
        /// A built-in handler works on the complete request.
        case builtinWaiting
        /// The request goes to the upstream; no response head yet. `mayRetry`: a body-less request of a method other
        /// than POST and PATCH that has not been retried, so a stale pooled connection may be replaced once.
        case forwarding(RequestBody, mayRetry: Bool)
        /// The upstream's response head went to the client; its body streams.
        case streamingResponse(RequestBody)
        case done(Ending)
    }

    /// Every input of the machine (the table tests drive it through `handle(_:)`; the driver calls the methods).
    public enum Event: Equatable, CaseIterable, Sendable {
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
        /// `close`: the connection must close after it whatever the body's state.
        case answer(close: Bool)
        /// An upstream connection took the request head; `backlog`: bytes in its send buffer after the held body.
        case upstreamConnected(backlog: Int)
        /// A forwarded body part left `backlog` bytes in the upstream connection's send buffer.
        case upstreamBacklog(Int)
        /// The upstream connection's send buffer drained below `Backpressure.lowWater`.
        case upstreamDrained
        case upstreamHead
        case upstreamPart
        case upstreamEnd
        case upstreamFailed(UpstreamFailure)
        /// The client's body-gap deadline (`body_timeout`) expired.
        case deadline

        /// One of each kind, for tables.
        public static let allCases: [Event] = [
            .bodyPart(count: 10), .bodyEnd, .clientClosed, .connectionClosed, .appCheckPassed, .builtinChosen,
            .answer(close: false), .upstreamConnected(backlog: 0), .upstreamBacklog(0), .upstreamDrained, .upstreamHead,
            .upstreamPart, .upstreamEnd, .upstreamFailed(.reset), .deadline,
        ]
    }

    /// What the driver does; one per event. Terminal actions (`answer`, `answerUpstreamFailure`, `answerTimeout`,
    /// `cutResponse`, `finishResponse`, `cancel`) include closing the upstream connection when one is held (never
    /// pooling it mid-exchange) and recording the exchange (its log line and metrics).
    public enum Action: Equatable, Sendable {
        /// Nothing (also the answer to a late event after the exchange ended).
        case none
        /// Keep the body bytes until the request is forwarded; the client's input pauses.
        case holdPart
        /// Send the body bytes to the upstream, then report `upstreamBacklog`.
        case forwardPart
        /// Add the body bytes to the built-in handler's request (its body budget permitting).
        case bufferBuiltinPart
        /// The body outgrew `maxBodyBytes`: answer 413 (or the built-in handler's words) and close.
        case refuseTooLarge
        /// The client's input pauses until `.resumeInput`.
        case pauseInput
        /// The client's input resumes (the upstream took the held body).
        case resumeInput
        /// The request body is complete: end it upstream (the last chunk; the response deadline starts).
        case endRequestBody
        /// The client's body is wanted now (a built-in handler's, or after the upstream took the head and what was
        /// held): `100 Continue` first when owed, then the client's input resumes unless the upstream's send buffer
        /// is still above `highWater` (then `upstreamDrained` resumes it).
        case wantBody(sendContinue: Bool, resumeInput: Bool)
        /// Hand the complete request to the built-in handler.
        case runBuiltin
        /// Write the upstream request head and acquire an upstream connection (`upstreamConnected` or
        /// `upstreamFailed` follows).
        case forward
        /// The pooled connection was stale: write the head again and acquire a fresh connection.
        case retry
        /// Write the upstream's response head to the client.
        case writeHead
        /// Write response body bytes to the client.
        case writePart
        /// The response is complete. `requestComplete`: the request body was read whole (else an HTTP/1.1
        /// connection must close).
        case finishResponse(requestComplete: Bool)
        /// Write the gateway's own complete answer; `close`: the connection closes after it.
        case answer(close: Bool)
        /// Answer the upstream's failure (502, 503 or 504 by its kind).
        case answerUpstreamFailure(UpstreamFailure, close: Bool)
        /// Answer 408 `body_timeout` and close.
        case answerTimeout
        /// Cut the response that has started (reset the stream, or close the HTTP/1.1 connection).
        case cutResponse
        /// Stop: nothing more goes to the client (499 unless a status was chosen).
        case cancel
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
    public init(bodyFollows: Bool, expectContinue: Bool, retryableMethod: Bool, highWater: Int = Backpressure.highWater) {
        state = .admitting(bodyFollows ? .streaming(held: true) : .complete)
        self.expectContinue = expectContinue && bodyFollows
        self.retryableMethod = retryableMethod
        self.highWater = highWater
    }

    // MARK: what the driver and the adapters read

    public var isDone: Bool { if case .done = state { return true } else { return false } }

    public var isAdmitting: Bool { if case .admitting = state { return true } else { return false } }

    /// The exchange wants no more request body (it is complete, there was none, or the exchange is over).
    public var requestComplete: Bool {
        switch state {
        case .admitting(let body), .forwarding(let body, _), .streamingResponse(let body): return body == .complete
        case .builtinBody: return false
        case .builtinWaiting, .done: return true
        }
    }

    /// A response head (the upstream's or the gateway's own) has gone to the client.
    public var responseStarted: Bool {
        switch state {
        case .streamingResponse, .done(.completed), .done(.answered), .done(.cut): return true
        default: return false
        }
    }

    /// The ending, once done.
    public var ending: Ending? { if case .done(let e) = state { return e } else { return nil } }

    /// The client's body is held back (the upstream's send buffer is past `highWater`) until `upstreamDrained`.
    public var inputHeld: Bool {
        switch state {
        case .forwarding(.streaming(held: true), _), .streamingResponse(.streaming(held: true)): return true
        default: return false
        }
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
        case .answer(let close): return answer(close: close)
        case .upstreamConnected(let backlog): return upstreamConnected(backlog: backlog)
        case .upstreamBacklog(let backlog): return upstreamBacklog(backlog)
        case .upstreamDrained: return upstreamDrained()
        case .upstreamHead: return upstreamHead()
        case .upstreamPart: return upstreamPart()
        case .upstreamEnd: return upstreamEnd()
        case .upstreamFailed(let kind): return upstreamFailed(kind)
        case .deadline: return deadline()
        }
    }

    public mutating func bodyPart(_ count: Int) -> Action {
        if case .done = state { return .none }
        bodyReceived += Int64(count)
        if bodyReceived > maxBodyBytes { return .refuseTooLarge }
        switch state {
        case .admitting(.streaming):
            return .holdPart
        case .builtinBody:
            return .bufferBuiltinPart
        case .forwarding(.streaming, _), .streamingResponse(.streaming):
            return .forwardPart
        case .admitting(.complete), .forwarding(.complete, _), .streamingResponse(.complete), .builtinWaiting:
            preconditionFailure("request body after its end")
        case .done:
            return .none
        }
    }

    public mutating func bodyEnd() -> Action {
        switch state {
        case .admitting(.streaming):
            state = .admitting(.complete)
            return .none
        case .builtinBody:
            state = .builtinWaiting
            return .runBuiltin
        case .forwarding(.streaming, let mayRetry):
            state = .forwarding(.complete, mayRetry: mayRetry)
            return .endRequestBody
        case .streamingResponse(.streaming):
            state = .streamingResponse(.complete)
            return .endRequestBody
        case .admitting(.complete), .forwarding(.complete, _), .streamingResponse(.complete), .builtinWaiting:
            preconditionFailure("request body ended twice")
        case .done:
            return .none
        }
    }

    public mutating func cancel(_ cause: Ending) -> Action {
        if case .done = state { return .none }
        state = .done(cause)
        return .cancel
    }

    public mutating func appCheckPassed() -> Action {
        switch state {
        case .admitting(let body):
            state = .forwarding(body, mayRetry: retryableMethod && body == .complete)
            return .forward
        case .done:
            return .none
        default:
            preconditionFailure("App Check answer outside admission: \(state)")
        }
    }

    public mutating func builtinChosen() -> Action {
        switch state {
        case .admitting(.complete):
            state = .builtinWaiting
            return .runBuiltin
        case .admitting(.streaming):
            state = .builtinBody
            return .wantBody(sendContinue: expectContinue, resumeInput: true)
        case .done:
            return .none
        default:
            preconditionFailure("built-in handler chosen outside admission: \(state)")
        }
    }

    public mutating func answer(close: Bool) -> Action {
        switch state {
        case .admitting(let body), .forwarding(let body, _):
            state = .done(.answered)
            return .answer(close: close || body != .complete)
        case .builtinBody:
            state = .done(.answered)
            return .answer(close: true)
        case .builtinWaiting:
            state = .done(.answered)
            return .answer(close: close)
        case .streamingResponse:
            state = .done(.cut)
            return .cutResponse
        case .done:
            return .none
        }
    }

    public mutating func upstreamConnected(backlog: Int) -> Action {
        switch state {
        case .forwarding(.complete, _):
            return .endRequestBody
        case .forwarding(.streaming(let held), let mayRetry):
            // Held since the head; what arrived meanwhile went out with the head.
            let resume = held && backlog <= highWater
            if resume { state = .forwarding(.streaming(held: false), mayRetry: mayRetry) }
            return .wantBody(sendContinue: expectContinue, resumeInput: resume)
        case .done:
            return .none
        default:
            preconditionFailure("upstream connected outside forwarding: \(state)")
        }
    }

    public mutating func upstreamBacklog(_ backlog: Int) -> Action {
        guard backlog > highWater else { return .none }
        switch state {
        case .forwarding(.streaming(held: false), let mayRetry):
            state = .forwarding(.streaming(held: true), mayRetry: mayRetry)
            return .pauseInput
        case .streamingResponse(.streaming(held: false)):
            state = .streamingResponse(.streaming(held: true))
            return .pauseInput
        case .forwarding(.streaming(held: true), _), .streamingResponse(.streaming(held: true)), .done:
            return .none
        default:
            preconditionFailure("upstream backlog without a body being forwarded: \(state)")
        }
    }

    /// Comes after every write that leaves the upstream's send buffer low, whatever the state: only a held body
    /// is resumed.
    public mutating func upstreamDrained() -> Action {
        switch state {
        case .forwarding(.streaming(held: true), let mayRetry):
            state = .forwarding(.streaming(held: false), mayRetry: mayRetry)
            return .resumeInput
        case .streamingResponse(.streaming(held: true)):
            state = .streamingResponse(.streaming(held: false))
            return .resumeInput
        default:
            return .none
        }
    }

    public mutating func upstreamHead() -> Action {
        switch state {
        case .forwarding(let body, _):
            state = .streamingResponse(body)
            return .writeHead
        case .done:
            return .none
        default:
            preconditionFailure("upstream response head outside forwarding: \(state)")
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
        case .streamingResponse(let body):
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
        case .forwarding(let body, let mayRetry):
            if mayRetry && kind.isRetryable {
                state = .forwarding(body, mayRetry: false)
                return .retry
            }
            state = .done(.answered)
            return .answerUpstreamFailure(kind, close: body != .complete)
        case .streamingResponse:
            // Part of the response is out already: all that can be done is to cut it.
            state = .done(.cut)
            return .cutResponse
        case .done:
            return .none
        default:
            preconditionFailure("upstream failure without an upstream: \(state)")
        }
    }

    /// `body_timeout`: the longest gap between two body reads. It does not count while the client's input is held
    /// (the App Check step decides, or the upstream is not taking the body): the client is not the one stalling.
    public mutating func deadline() -> Action {
        switch state {
        case .admitting(.streaming), .forwarding(.streaming(held: true), _), .streamingResponse(.streaming(held: true)):
            return .deferDeadline
        case .builtinBody, .forwarding(.streaming(held: false), _):
            state = .done(.answered)
            return .answerTimeout
        case .streamingResponse(.streaming(held: false)):
            state = .done(.cut)
            return .cutResponse
        case .admitting(.complete), .forwarding(.complete, _), .streamingResponse(.complete), .builtinWaiting, .done:
            return .none
        }
    }
}
