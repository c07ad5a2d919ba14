import HTTPWire

/// One exchange's stream on an HTTP/2 upstream connection (`H2UpstreamStream`), as a value type: events in, actions
/// out, no session, no socket, no clock (`now` comes with the events), so every rule is tested without a loop
/// (`H2UpstreamStreamStateTests`). The data lives in the states: how far the request went (whether a body byte was
/// given to the session, which stops a refused stream from moving), whether the response head came and how many
/// response bytes wait for the client; beside them the stream's one deadline (`Deadline`, kept here rather than in
/// `RequestDeadlines`: it is pushed by bytes either way and rearmed lazily, like the tunnel's).
///
/// Rules (SPEC §6.1, as for HTTP/1.1): `response_timeout` from the head until the response head, then between two
/// moves of bytes (the route's `stream_idle_timeout` instead, when set); a stream the server refused before any
/// response byte and before any body byte went to the session moves to another connection, at most `maxMoves` times;
/// the connection failing under a stream that saw no response on a connection that had served others is
/// `stale_connection` (retried once by the exchange); a response byte the client could not take is acknowledged to
/// the upstream (`consume`) only once the client drained; everything after the end is ignored.
public struct H2UpstreamStreamState: Equatable, Sendable {
    /// The request's side.
    public enum Request: Equatable, Sendable {
        /// The head is submitted, a body may follow; nothing of it went to the session yet.
        case headSent
        /// The head is submitted with END_STREAM (no body): complete, nothing but the head went.
        case headOnly
        /// Body bytes went to the session; more may follow.
        case sending
        /// The end of the body (or its trailers) went to the session.
        case ended

        /// More body may be given.
        public var isOpen: Bool { self == .headSent || self == .sending }
        /// Nothing but the head went: a server that refused the stream may be sent it again.
        public var movable: Bool { self == .headSent || self == .headOnly }
    }

    /// The response's side.
    public enum Response: Equatable, Sendable {
        case awaitingHead
        /// The head came; the client takes what arrives.
        case flowing
        /// The client's buffer is full: `unconsumed` bytes were handed to it but not acknowledged to the upstream.
        case paused(unconsumed: Int)
    }

    public enum State: Equatable, Sendable {
        /// The head is not submitted yet (no stream id).
        case created
        case active(response: Response, request: Request)
        /// Completed, failed or abandoned: nothing moves it.
        case done
    }

    /// The stream's one bound: none, or due `at`, pushed `after` nanoseconds past each move of bytes; `kind` is the
    /// failure it ends in.
    public enum Deadline: Equatable, Sendable {
        case none
        case armed(at: UInt64, after: UInt64, kind: UpstreamFailure)
    }

    public enum Event: Equatable, Sendable {
        /// The session took the request head (it has an id); `endStream`: no body follows.
        case headSubmitted(endStream: Bool, now: UInt64)
        /// Body bytes are to go to the session.
        case body(now: UInt64)
        /// The end of the body (or trailers) is to go to the session.
        case end(now: UInt64)
        /// The response head arrived; `streamIdleTimeout`: the route's bound between body bytes, 0 when unset.
        case responseHead(now: UInt64, streamIdleTimeout: UInt64)
        /// The client took the response head but its buffer is full.
        case clientFull
        /// Response bytes arrived (before they are handed to the client).
        case responseData(count: Int, now: UInt64)
        /// `count` response bytes were handed to the client; `more`: it can take more.
        case delivered(count: Int, more: Bool)
        /// The client's buffer drained.
        case clientDrained
        /// The response ended (END_STREAM).
        case complete
        /// nghttp2 ended the stream.
        case streamFailed(H2StreamFailure)
        /// The connection failed under the stream (connect refused or timed out, no `h2` by ALPN, lost).
        case connectionFailed(UpstreamFailure)
        /// A refused stream went to another connection; `reused`: that one had served other streams.
        case moved(reused: Bool)
        /// A failure found by the stream itself (an untranslatable head, a session that takes no stream, no connection
        /// to move to).
        case fail(UpstreamFailure)
        /// The exchange let go of the stream.
        case abandon
        /// The timer fired.
        case timer(now: UInt64)
    }

    public enum Action: Equatable, Sendable {
        case none
        /// Run the timer at this time (unless it runs earlier already).
        case arm(UInt64)
        /// Give the body bytes (or the end) to the session.
        case send
        /// Hand the response head to the client, and run the timer at this time.
        case deliverHead(arm: UInt64)
        /// Hand the response bytes to the client (`delivered` follows).
        case deliverData
        /// Acknowledge this many response bytes to the upstream.
        case consume(Int)
        /// Submit the head again on another connection (`moved`, or `fail` when there is none).
        case move
        /// Tell the client the response ended.
        case complete
        /// Let go; `reset`: send RST_STREAM(CANCEL) (the stream has an id).
        case abandon(reset: Bool)
        /// Tell the client it failed with `kind`; `reset`: send RST_STREAM(CANCEL).
        case fail(UpstreamFailure, reset: Bool)
    }

    /// Moves of a refused stream to another connection, at most.
    public static let maxMoves = 3

    // (Declared in this order, the response before the request, the one-byte fields together: the machine is part of
    // every stream object.)
    public private(set) var state = State.created
    /// What the connection failing under the stream before its response head means: `stale_connection` on a connection
    /// that had served other streams (it may have been closed by the server meanwhile), else `reset`.
    public private(set) var lossBeforeResponse: UpstreamFailure
    public private(set) var deadline = Deadline.none
    public private(set) var moves = 0
    /// `response_timeout`, nanoseconds.
    public let responseTimeout: UInt64

    public init(reused: Bool, responseTimeout: UInt64) {
        lossBeforeResponse = reused ? .staleConnection : .reset
        self.responseTimeout = responseTimeout
    }

    public var isDone: Bool { state == .done }

    public mutating func handle(_ event: Event) -> Action {
        switch (state, event) {
        case (.done, .responseData(let count, _)):
            // Not the client's any more: acknowledged at once, the connection's window stays open for the others.
            return .consume(count)
        case (.done, .delivered(let count, let more)):
            return more ? .consume(count) : .none
        case (.done, _):
            return .none

        case (.created, .headSubmitted(let endStream, let now)):
            state = .active(response: .awaitingHead, request: endStream ? .headOnly : .headSent)
            return .arm(arm(now, after: responseTimeout, kind: .responseTimeout))
        case (.created, .fail(let kind)), (.active, .fail(let kind)):
            return fail(kind)
        case (.created, .abandon), (.active, .abandon):
            let reset = state != .created
            end()
            return .abandon(reset: reset)
        case (.created, .connectionFailed(let kind)), (.active(.awaitingHead, _), .connectionFailed(let kind)):
            return fail(kind == .reset ? lossBeforeResponse : kind)
        case (.active, .connectionFailed(let kind)):
            return fail(kind)
        case (.created, .streamFailed(let failure)), (.active, .streamFailed(let failure)):
            return streamFailed(failure)
        case (.created, _):
            return .none

        case (.active(let response, let request), .body(let now)):
            guard request.isOpen else { return .none }
            state = .active(response: response, request: .sending)
            pushDeadline(now)
            return .send
        case (.active(let response, let request), .end(let now)):
            guard request.isOpen else { return .none }
            state = .active(response: response, request: .ended)
            pushDeadline(now)
            return .send
        case (.active(let response, let request), .responseHead(let now, let idle)):
            if response == .awaitingHead { state = .active(response: .flowing, request: request) }
            let at = idle != 0 ? arm(now, after: idle, kind: .streamIdleTimeout)
                : arm(now, after: responseTimeout, kind: .responseTimeout)
            return .deliverHead(arm: at)
        case (.active(let response, let request), .clientFull):
            if case .paused = response { return .none }
            state = .active(response: .paused(unconsumed: 0), request: request)
            return .none
        case (.active, .responseData(_, let now)):
            pushDeadline(now)
            return .deliverData
        case (.active(let response, let request), .delivered(let count, let more)):
            // Taken by a client that can take more: acknowledged. Else (or while paused) held until it drains.
            if case .paused(let n) = response {
                state = .active(response: .paused(unconsumed: n + count), request: request)
                return .none
            }
            if more { return .consume(count) }
            state = .active(response: .paused(unconsumed: count), request: request)
            return .none
        case (.active(.paused(let unconsumed), let request), .clientDrained):
            state = .active(response: .flowing, request: request)
            return unconsumed > 0 ? .consume(unconsumed) : .none
        case (.active, .clientDrained):
            return .none
        case (.active, .complete):
            end()
            return .complete
        case (.active, .moved(let reused)):
            moves += 1
            lossBeforeResponse = reused ? .staleConnection : .reset
            return .none
        case (.active, .timer(let now)):
            guard case .armed(let at, _, let kind) = deadline else { return .none }
            switch RequestDeadlines.expiry(of: at, now: now) {
            case .none: return .none
            case .early(let at): return .arm(at)
            case .expired: return fail(kind)
            }
        case (.active, .headSubmitted):
            return .none
        }
    }

    private mutating func streamFailed(_ failure: H2StreamFailure) -> Action {
        switch failure {
        case .refused:
            // Not processed by the server (RFC 9113 §8.7): sent again elsewhere while nothing but the head went.
            switch state {
            case .active(.awaitingHead, let request) where request.movable && moves < Self.maxMoves: return .move
            default: return fail(.staleConnection)
            }
        case .malformed: return fail(.badResponse)
        case .reset: return fail(.reset)
        case .connectionClosed:
            if case .active(let response, _) = state, response != .awaitingHead { return fail(.reset) }
            return fail(lossBeforeResponse)
        }
    }

    private mutating func fail(_ kind: UpstreamFailure) -> Action {
        let submitted = state != .created
        end()
        // A stale connection's stream is gone with it: nothing to reset.
        return .fail(kind, reset: submitted && kind != .staleConnection)
    }

    private mutating func end() {
        state = .done
        deadline = .none
    }

    private mutating func arm(_ now: UInt64, after: UInt64, kind: UpstreamFailure) -> UInt64 {
        let at = now &+ after
        deadline = .armed(at: at, after: after, kind: kind)
        return at
    }

    /// Bytes moved on the stream: the current bound starts again (the timer, running earlier, rearms itself).
    private mutating func pushDeadline(_ now: UInt64) {
        guard case .armed(_, let after, let kind) = deadline else { return }
        deadline = .armed(at: now &+ after, after: after, kind: kind)
    }
}
