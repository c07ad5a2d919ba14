/// The lifecycle of one client HTTP/1.1 connection as a value (AsyncHTTPClient's `HTTP1ConnectionStateMachine`
/// beside its request machine; here `ExchangeStateMachine`): every input is a `mutating` event, every decision its
/// return value, and `ClientConnection` only performs it (reads, writes, pauses, closes, starts the next request).
/// No socket, no clock: tested event by event (`HTTP1ConnectionStateMachineTests`).
///
/// Whether the connection is kept alive after the exchange is decided here alone: the events that forbid it (the
/// request's `Connection: close` or HTTP/1.0, draining, a response delimited by close, an answer given before the
/// body was read, a malformed request) are recorded as they happen, and `exchangeFinished` returns the one answer.
public struct HTTP1ConnectionStateMachine: Equatable {
    public enum State: Equatable {
        /// The TLS handshake is under way.
        case handshaking
        /// Waiting for a request head (`HeadProgress`).
        case head(HeadProgress)
        /// The exchange decides or answers; body bytes and pipelined requests stay buffered.
        case busy
        /// The exchange wants the body, which is decoded and handed over as it arrives.
        case body
        /// The exchange is over and the connection closes once its output is written (then lingers or closes).
        case closing
        /// The last response is out and the sending side shut; what the client still sends is read and dropped
        /// until it closes or `Linger` ends it (ClientConnection+Closing.swift).
        case lingering
        /// A WebSocket after `101`; the relay moves the bytes (ClientConnection+Tunnel.swift).
        case tunnel(TunnelHandle)
        case closed

        /// Requests are read and answered (not `lingering`, `tunnel` or `closed`).
        public var isServing: Bool {
            switch self {
            case .handshaking, .head, .busy, .body, .closing: return true
            case .lingering, .tunnel, .closed: return false
            }
        }
    }

    /// Where the next request head stands: `first` (nothing read on this connection yet: an h2c preface may come
    /// instead), `next` (after a response), `started` (its first byte arrived: `header_timeout` runs).
    public enum HeadProgress: Equatable { case first, next, started }

    public typealias Input = ConnectionInput

    public typealias PeerStream = ConnectionPeerStream

    public typealias Persistence = ConnectionPersistence

    /// The input loop (`ClientConnection.processInput`) is `running`: a request finished inside it is continued by
    /// it, not by a new one (pipelined requests never nest on the stack).
    public enum InputLoop: Equatable { case idle, running }

    /// The next request's turn was `scheduled` for the end of the loop's batch of events (`inputTurnDue`).
    public enum NextTurn: Equatable { case none, scheduled }

    public private(set) var state: State
    public private(set) var input = Input.flowing
    public private(set) var peer = PeerStream.open
    public private(set) var persistence = Persistence.keepAlive
    public private(set) var inputLoop = InputLoop.idle
    public private(set) var turn = NextTurn.none

    public init(tls: Bool) {
        state = tls ? .handshaking : .head(.first)
    }

    public var readHeld: Bool { input == .paused || input == .pausedReadOwed }

    // MARK: socket

    /// What a socket event asks for.
    public enum EventAction: Equatable {
        case ignore
        /// Read and drop (lingering).
        case linger
        /// The tunnel's relay handles it.
        case relay(TunnelHandle)
        /// The client is gone while its input was held: close (499 for a request under way).
        case clientGone
        /// Go on with the TLS handshake.
        case handshake
        /// Serve: `read` from the socket (else the read is owed), then write what is pending.
        case serve(read: Bool)
    }

    /// An epoll event: `hangup` (RDHUP, HUP or ERR), `readable` (anything that may have brought bytes or the end).
    public mutating func socketEvent(hangup: Bool, readable: Bool) -> EventAction {
        switch state {
        case .closed: return .ignore
        case .lingering: return .linger
        case .tunnel(let relay): return .relay(relay)
        case .handshaking, .head, .busy, .body, .closing: break
        }
        if hangup {
            peer = .ended
            // Reading is paused only while a request is under way (its body held back, or pipelined bytes waiting
            // for its response): what is still unread cannot change the outcome, the client is gone.
            if readHeld { return .clientGone }
        }
        if state == .handshaking { return .handshake }
        guard readable else { return .serve(read: false) }
        if readHeld {
            input = .pausedReadOwed
            return .serve(read: false)
        }
        return .serve(read: true)
    }

    /// The TLS handshake finished; `h2`: ALPN chose HTTP/2 (the socket is handed over).
    public enum HandshakeAction: Equatable { case handOver, read }

    public mutating func handshakeDone(h2: Bool) -> HandshakeAction {
        guard state == .handshaking else { return .read }
        if h2 {
            state = .closed
            return .handOver
        }
        state = .head(.first)
        return .read
    }

    /// A read is asked for: false when the input loop runs (the read is owed, taken when it ends).
    public mutating func readStarting() -> Bool {
        if inputLoop == .running {
            input = readHeld ? .pausedReadOwed : .readOwed
            return false
        }
        input = readHeld ? .paused : .flowing
        return true
    }

    /// The read loop stopped with input held: true when the client is gone (its end is already known: no edge
    /// will come again); otherwise the read is owed.
    public mutating func readHeldAfterRead(endPending: Bool) -> Bool {
        guard readHeld else { return false }
        if peer == .ended || endPending { return true }
        input = .pausedReadOwed
        return false
    }

    public mutating func pauseReading() { input.pause() }

    /// False when reading was not held.
    public mutating func resumeReading() -> Bool { input.resume() }

    /// The input loop starts: false when it already runs (the outer run sees the new state and carries on).
    public mutating func inputLoopStarting() -> Bool {
        if inputLoop == .running { return false }
        inputLoop = .running
        return true
    }

    /// The input loop ended: true when a read owed meanwhile is due now.
    public mutating func inputLoopEnded() -> Bool {
        inputLoop = .idle
        return input == .readOwed && state.isServing
    }

    // MARK: request

    /// A byte of a request head arrived: true for the first one (its `header_timeout` starts).
    public mutating func headBytes() -> Bool {
        guard case .head(let progress) = state, progress != .started else { return false }
        state = .head(.started)
        return true
    }

    /// Nothing of a request has been read yet, so an h2c preface may come instead.
    public var mayBePreface: Bool { state == .head(.first) }

    /// The socket now speaks HTTP/2 (the h2c preface).
    public mutating func handedOver() { state = .closed }

    /// A complete request head: the exchange starts. `keepAlive`: the request allows it (HTTP/1.1 without
    /// `Connection: close`, or HTTP/1.0 with `keep-alive`).
    public mutating func requestHead(keepAlive: Bool, draining: Bool) {
        if !keepAlive || draining { persistence = .close }
        state = .busy
    }

    /// No request head could be read (malformed, or `header_timeout`): answered, then the connection closes.
    public mutating func noRequest() {
        persistence = .close
        state = .busy
    }

    /// What the exchange's wish for its body means here.
    public enum BodyAction: Equatable {
        /// The body is wanted now: its deadline starts, held input resumes or the buffered bytes are processed.
        case start
        /// The body held back was taken: reading resumes.
        case resume
        case none
    }

    public mutating func bodyWanted() -> BodyAction {
        switch state {
        case .busy:
            state = .body
            return .start
        case .body:
            return .resume
        case .handshaking, .head, .closing, .lingering, .tunnel, .closed:
            return .none
        }
    }

    /// The body is in: from here the upstream bounds the wait.
    public mutating func bodyComplete() {
        if state == .body { state = .busy }
    }

    // MARK: response

    /// The response head is about to be written. `requestComplete`: the body was read whole (else its rest must
    /// not be read as a request).
    public mutating func responseHead(requestComplete: Bool, draining: Bool) {
        if !requestComplete || draining { persistence = .close }
    }

    /// The response body ends when the connection does (an HTTP/1.0 client and no length).
    public mutating func responseDelimitedByClose() { persistence = .close }

    /// The response is complete; `requestComplete` false: answered before the body was read whole (the rest of
    /// it must not be read as a request).
    public mutating func responseEnd(requestComplete: Bool) {
        if !requestComplete { persistence = .close }
    }

    /// An answer of the gateway's own; `close`: the request was malformed or its body not read.
    public mutating func ownAnswer(close: Bool) {
        if close { persistence = .close }
    }

    /// `Connection: close` goes on the response being written.
    public var closesAfterResponse: Bool { persistence == .close }

    /// The server drains: true when the connection is between requests with nothing buffered and closes now;
    /// otherwise it closes after its current response.
    public mutating func drain(idle: Bool) -> Bool {
        persistence = .close
        switch state {
        case .handshaking, .head(.first), .head(.next): return idle
        default: return false
        }
    }

    /// The one keep-alive decision, when the exchange is over.
    public enum FinishAction: Equatable {
        case ignore
        /// Write what is left, then close or linger (`mayLinger`: the client's stream has not ended).
        case closeAfterOutput(mayLinger: Bool)
        /// Keep alive: the next request (`header_timeout`/`idle_timeout` from now; `nextRequestReady` after the
        /// output is flushed).
        case awaitNextRequest
    }

    public mutating func exchangeFinished() -> FinishAction {
        guard state.isServing else { return .ignore }
        if persistence == .close {
            state = .closing
            return .closeAfterOutput(mayLinger: peer == .open)
        }
        state = .head(.next)
        return .awaitNextRequest
    }

    /// Kept alive and flushed: true when the next request's turn must be scheduled for the end of the batch (the
    /// exchange finished outside the input loop, with a pipelined request buffered or reading held behind it).
    /// Inside the input loop, that loop carries on and reads again once it is done.
    public mutating func nextRequestReady(buffered: Bool) -> Bool {
        if inputLoop == .running {
            _ = resumeReading()
            return false
        }
        guard readHeld || buffered, turn == .none else { return false }
        turn = .scheduled
        return true
    }

    /// The scheduled turn came (end of the batch of events).
    public enum TurnAction: Equatable { case none, resume, process }

    public mutating func inputTurnDue() -> TurnAction {
        turn = .none
        guard case .head = state else { return .none }
        return readHeld ? .resume : .process
    }

    /// The output is written (`exchangeActive`: an exchange is still under way): true when the connection is to
    /// close now (or linger).
    public func outputDrained(exchangeActive: Bool) -> Bool {
        !exchangeActive && persistence == .close
    }

    // MARK: closing

    /// The connection may linger rather than close (it has a plan, the client is still there, it still serves).
    public func mayLinger(hasPlan: Bool) -> Bool { hasPlan && peer == .open && state.isServing }

    public mutating func lingerStarted() { state = .lingering }

    public mutating func tunnelOpened(_ relay: TunnelHandle) { state = .tunnel(relay) }

    /// What closing finds: the relay to end when it was a tunnel; nil when already closed.
    public enum CloseAction: Equatable { case ignore, close(wasHandshaking: Bool, relay: TunnelHandle?) }

    public mutating func close() -> CloseAction {
        let was = state
        guard was != .closed else { return .ignore }
        state = .closed
        if case .tunnel(let relay) = was { return .close(wasHandshaking: false, relay: relay) }
        return .close(wasHandshaking: was == .handshaking, relay: nil)
    }
}
