/// The lifecycle of one client HTTP/2 connection as a value, beside `HTTP1ConnectionStateMachine`: the connection's
/// state (the wait for its first request, serving, closed), the client's end of stream, whether nghttp2 is delivering
/// callbacks (frames are queued then, written after) and whether a write is scheduled for the end of the batch.
/// `H2Connection` feeds it events and performs its answers; streams live in nghttp2's session and `StreamTable`.
/// Once closed, the session itself ignores what a late stream asks (its nghttp2 session is gone), so the calls
/// streams make need no check of their own. Tested event by event (`H2ConnectionStateMachineTests`).
public struct H2ConnectionStateMachine: Equatable, Sendable {
    public enum State: Equatable, Sendable {
        /// Until the first request: `header_timeout` (an h2c or h2 client that sends its preface and nothing else
        /// holds a slot no longer than a silent HTTP/1.1 one).
        case awaitingFirstRequest
        /// A request has been received: between streams `idle_timeout` applies.
        case serving
        case closed
    }

    /// nghttp2 is `delivering` callbacks: frames are queued then, and flushed after (it forbids re-entering `send`).
    public enum Delivery: Equatable, Sendable { case idle, delivering }

    /// A write is `scheduled` for the end of the loop's batch of events (`H2FlushScheduler`).
    public enum FlushTurn: Equatable, Sendable { case none, scheduled }

    public private(set) var state = State.awaitingFirstRequest
    public private(set) var peer = ConnectionPeerStream.open
    public private(set) var delivery = Delivery.idle
    public private(set) var flushTurn = FlushTurn.none

    /// `peerEnded`: the HTTP/1.1 connection it continues was already told the client's stream ended (an edge is
    /// reported once, so it is passed on).
    public init(peerEnded: Bool = false) {
        if peerEnded { peer = .ended }
    }

    public var isOpen: Bool { state != .closed }

    /// An epoll event: false when closed (ignored); `hangup`: RDHUP, HUP or ERR.
    public mutating func socketEvent(hangup: Bool) -> Bool {
        guard isOpen else { return false }
        if hangup { peer = .ended }
        return true
    }

    /// Bytes go to nghttp2 (its callbacks follow, synchronously).
    public mutating func deliveryStarted() { delivery = .delivering }
    public mutating func deliveryEnded() { delivery = .idle }

    /// Frames may be pulled from nghttp2 and written now.
    public var mayFlush: Bool { isOpen && delivery == .idle }

    /// A stream's request arrived.
    public mutating func requestReceived() {
        if state == .awaitingFirstRequest { state = .serving }
    }

    /// A write is wanted: true when it must be scheduled (open, and not scheduled yet).
    public mutating func flushWanted() -> Bool {
        guard isOpen, flushTurn == .none else { return false }
        flushTurn = .scheduled
        return true
    }

    /// The scheduled write is due.
    public mutating func flushDue() { flushTurn = .none }

    /// Which client deadline applies now (`RequestDeadlines`).
    public enum IdleRule: Equatable, Sendable {
        /// Closed: none.
        case none
        /// Streams are open: no connection deadline (each stream has its own).
        case streamsOpen
        /// `header_timeout` until the first request.
        case firstRequest
        /// `idle_timeout` between streams.
        case nextRequest
    }

    public func idleRule(streamsOpen: Bool) -> IdleRule {
        switch state {
        case .closed: return .none
        case _ where streamsOpen: return .streamsOpen
        case .awaitingFirstRequest: return .firstRequest
        case .serving: return .nextRequest
        }
    }

    /// The idle deadline passed with no stream open: GOAWAY, and close at once when the session is finished or the
    /// client never sent a request (nothing to wait for, no PING round trip from a client that may not listen).
    public func closesOnIdle(sessionFinished: Bool) -> Bool {
        isOpen && (sessionFinished || state == .awaitingFirstRequest)
    }

    /// False when already closed.
    public mutating func close() -> Bool {
        guard isOpen else { return false }
        state = .closed
        return true
    }
}
