/// The client-side deadlines of the request path, as a value type used by both protocols: events in, a deadline and
/// an action out. No clock of its own (every event carries `now`, monotonic nanoseconds) and no socket, so every
/// timeout rule is unit-tested with a manual clock. Its owner holds one `LoopTimer` and schedules it at `deadline`:
/// an HTTP/1.1 connection (every rule below), an HTTP/2 connection (the wait for its first request, then
/// `idle_timeout` while it has no stream: `awaitFirstRequest`, `headComplete`, `awaitNextRequest`) and an HTTP/2
/// stream (the body gap: `bodyProgressed`, `requestComplete`). What an expired body gap means (408, a cut response,
/// or nothing while the client's input is held) is the exchange's decision (`ExchangeStateMachine.deadline`).
/// The upstream's `connect_timeout`, `response_timeout` and `stream_idle_timeout` are its sibling's,
/// `UpstreamDeadlines`, which shares the rule of when a deadline has expired (`expiry(of:now:)`).
///
/// The rules (docs/behaviour.md, like nginx's `client_header_timeout`, `client_body_timeout`, `keepalive_timeout`):
/// - a new connection must finish its TLS handshake and start its first request within `header_timeout` from accept;
/// - a request head must be complete within `header_timeout` from its first byte (408 `header_timeout`);
/// - `body_timeout` is the longest gap between two body reads; it does not run while reading is paused because the
///   upstream is not taking the body (the client is not the one stalling); 408 `body_timeout` if nothing of the
///   response went out, else the connection is cut;
/// - between requests a keep-alive connection is closed silently after `idle_timeout`;
/// - while the request is being admitted or the upstream is answering, no client deadline runs (the upstream's
///   `connect_timeout` and `response_timeout` bound that wait).
public struct RequestDeadlines: Equatable, Sendable {
    public struct Limits: Equatable, Sendable {
        public var header: UInt64
        public var body: UInt64
        public var idle: UInt64

        public init(header: UInt64, body: UInt64, idle: UInt64) {
            self.header = header
            self.body = body
            self.idle = idle
        }
    }

    /// A fresh client: it must start its first request within `header_timeout`.
    public init(limits: Limits, now: UInt64) {
        self.init(limits: limits, now: now, tls: false)
    }

    public enum State: Equatable, Sendable {
        /// TLS handshake in progress.
        case handshake
        /// Connected (or between requests), no byte of a request yet: `fresh` until the first request.
        case awaitingRequest(fresh: Bool)
        /// A request head has started arriving.
        case head
        /// The head is in; App Check, the upstream or a built-in handler decides. No client deadline.
        case busy
        /// The request body is being read.
        case body
        /// The response head arrived on a route with `stream_idle_timeout`: the upstream connection's idle bound
        /// (bytes either way) replaces the body gap; no client deadline runs until the next request.
        case stream
        case closed
    }

    /// What to do when the timer fires.
    public enum Action: Equatable, Sendable {
        /// Fired early (a deadline moved later since it was scheduled): schedule again at this time.
        case reschedule(UInt64)
        /// Nothing to do (no deadline, or the connection is closed).
        case none
        /// Close without a word (an idle connection, or one that never sent a byte).
        case close
        /// Cut the connection (a handshake that did not finish; part of a response already sent).
        case abort
        /// Answer 408 `request_timeout` with this reason, then close.
        case requestTimeout(reason: String)
    }

    public let limits: Limits
    public private(set) var state: State
    /// When the current deadline expires; 0 when none runs.
    public private(set) var deadline: UInt64 = 0

    public init(limits: Limits, now: UInt64, tls: Bool) {
        self.limits = limits
        state = tls ? .handshake : .awaitingRequest(fresh: true)
        deadline = now + limits.header
    }

    /// The handshake finished: from here the connection waits for its first request for `idle_timeout`.
    public mutating func handshakeDone(now: UInt64) {
        state = .awaitingRequest(fresh: false)
        deadline = now + limits.idle
    }

    /// No request yet, and none under way (an HTTP/2 connection after its preface): `header_timeout` from now.
    public mutating func awaitFirstRequest(now: UInt64) {
        state = .awaitingRequest(fresh: true)
        deadline = now + limits.header
    }

    /// The first byte of a request head arrived.
    public mutating func headStarted(now: UInt64) {
        state = .head
        deadline = now + limits.header
    }

    /// The head is complete: admission, App Check and the upstream take over.
    public mutating func headComplete() {
        state = .busy
        deadline = 0
    }

    /// The body starts being read, or more of it arrived.
    public mutating func bodyProgressed(now: UInt64) {
        if state == .stream { return }
        state = .body
        deadline = now + limits.body
    }

    /// The request body is complete (or there was none): the upstream's `response_timeout` bounds the wait.
    public mutating func requestComplete() {
        if state == .body || state == .head { state = .busy }
        deadline = 0
    }

    /// The response head of a stream arrived (see `State.stream`).
    public mutating func streamStarted() {
        state = .stream
        deadline = 0
    }

    /// The response went out and the connection stays open for another request.
    public mutating func awaitNextRequest(now: UInt64) {
        state = .awaitingRequest(fresh: false)
        deadline = now + limits.idle
    }

    public mutating func closed() {
        state = .closed
        deadline = 0
    }

    /// Where a deadline stands when its timer fires.
    public enum Expiry: Equatable {
        /// No deadline runs (0).
        case none
        /// Not yet: the deadline moved later since the timer was scheduled; schedule it again at this time.
        case early(UInt64)
        case expired
    }

    /// The one rule for every deadline of the request path, client side (`fire`), upstream side
    /// (`UpstreamDeadlines.fire`, `H2UpstreamStreamState`'s timer), a tunnel's idle bound (`TunnelState`) and a
    /// lingering close: a deadline of 0 is none, and a deadline has expired once `now` has reached it. Deadlines only
    /// move later between schedulings (each event pushes its own), so a timer that fires early is scheduled again at
    /// the current deadline instead of being moved on every event.
    @inline(__always)
    public static func expiry(of deadline: UInt64, now: UInt64) -> Expiry {
        if deadline == 0 { return .none }
        return now < deadline ? .early(deadline) : .expired
    }

    /// The timer fired at `now`. `readPaused`: body reading is paused for upstream backpressure;
    /// `responseStarted`: part of the response has been written to the client.
    public mutating func fire(now: UInt64, readPaused: Bool, responseStarted: Bool) -> Action {
        guard state != .closed else { return .none }
        switch Self.expiry(of: deadline, now: now) {
        case .none: return .none
        case .early(let at): return .reschedule(at)
        case .expired: break
        }
        switch state {
        case .handshake:
            return .abort
        case .awaitingRequest:
            return .close
        case .head:
            return .requestTimeout(reason: "header_timeout")
        case .body:
            if readPaused {
                deadline = now + limits.body
                return .reschedule(deadline)
            }
            return responseStarted ? .abort : .requestTimeout(reason: "body_timeout")
        case .busy, .stream, .closed:
            return .none
        }
    }
}
