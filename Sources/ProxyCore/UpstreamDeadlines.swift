/// The upstream side's deadlines of the request path, the sibling of `RequestDeadlines` (the client side's) in the
/// same style: events in, a deadline and an action out, no clock of its own (every event carries `now`, monotonic
/// nanoseconds, read once by the owner per event) and no socket. Whether a deadline has expired is decided by the one
/// rule both share, `RequestDeadlines.expiry(of:now:)`.
///
/// Its owner holds one `LoopTimer` and performs the actions: `arm(at)` schedules the timer at `at` unless it already
/// fires earlier (a timer that fires early is answered with `arm` again: moving a deadline later costs no timer-heap
/// work), `fail(kind)` ends the exchange with that `UpstreamFailure`, `close` closes an idle pooled connection.
///
/// The rules (docs/configuration.md: `connect_timeout`, `response_timeout`, `stream_idle_timeout`):
/// - a new connection must be connected (TCP, and TLS to an `https://` upstream) within `connect_timeout`
///   (`connect_timeout`, answered 504);
/// - from the moment the request is fully sent until the response head arrives, and then between two reads of the
///   response body: `response_timeout` (`response_timeout`, answered 504 while nothing of the response went out);
/// - on a route with `stream_idle_timeout`, once the response head is in, that one idle bound replaces the response
///   gap, and request body bytes sent count as movement too (`stream_idle_timeout`, 502 if nothing went out);
/// - a connection idle in the pool is closed after the server's `idle_timeout` (the pool gives the time);
/// - between those (a reused connection before its request is sent, after the response, in a tunnel) nothing runs.
///
/// Use by an HTTP/1.1 connection (`UpstreamConnection`): `attached`, `connected`, `requestSent`, `responseHead`,
/// `responseProgressed` per body read, `requestProgressed` per request body write, `responseComplete`, `pooled`.
/// An HTTP/2 stream can use the same value without the connect phase (its connection's is separate): `attached`
/// with `connecting: false`, `requestSent` when it is submitted, `responseHead`, and `responseProgressed` for bytes
/// moving either way (on a stream every movement restarts the current bound); `pooled` does not apply.
public struct UpstreamDeadlines: Equatable, Sendable {
    /// `connect_timeout` and `response_timeout` of the upstream, in nanoseconds.
    public struct Limits: Equatable, Sendable {
        public var connect: UInt64
        public var response: UInt64

        public init(connect: UInt64, response: UInt64) {
            self.connect = connect
            self.response = response
        }
    }

    public enum Phase: Equatable, Sendable {
        /// No deadline runs: attached to a reused connection before its request is sent, connected before the
        /// request is sent, after the response, in a tunnel.
        case none
        /// TCP (and TLS) connect in progress: `connect_timeout`.
        case connecting
        /// The request is sent; no response head yet: `response_timeout`.
        case awaitingResponse
        /// The response head is in (no `stream_idle_timeout`): `response_timeout` between two body reads.
        case receiving
        /// The response head is in on a route with `stream_idle_timeout`: that bound, over both directions.
        case streaming
        /// Idle in the pool: the server's `idle_timeout`.
        case pooled
    }

    /// What the owner does.
    public enum Action: Equatable, Sendable {
        case none
        /// Make the timer fire at this time at the latest (schedule it unless it already fires earlier).
        case arm(UInt64)
        /// The exchange failed with this kind (see `isGatewayTimeout`).
        case fail(UpstreamFailure)
        /// An idle pooled connection timed out: close it without a word.
        case close
    }

    /// Every event, for the table test and for owners that prefer one entry point; each carries `now` through
    /// `handle(_:now:)`.
    public enum Event: Equatable, Sendable {
        case attached(connecting: Bool)
        case connected(requestSent: Bool)
        case requestSent
        case responseHead
        case responseProgressed
        case requestProgressed
        case responseComplete
        case pooled(until: UInt64)
        case fire
    }

    public let limits: Limits
    public private(set) var phase = Phase.none
    /// When the current deadline expires; 0 when none runs.
    public private(set) var deadline: UInt64 = 0
    /// The route's `stream_idle_timeout` for the current exchange, 0 when it sets none; cleared by `attached`.
    public var streamIdle: UInt64 = 0

    public init(limits: Limits) {
        self.limits = limits
    }

    /// A connect/response failure answered 504 `upstream_timeout` (the upstream did not answer in time); every other
    /// kind, `stream_idle_timeout` included (the stream went silent after it started), is answered 502 or 503.
    public static func isGatewayTimeout(_ kind: UpstreamFailure) -> Bool {
        kind == .responseTimeout || kind == .connectTimeout
    }

    public mutating func handle(_ event: Event, now: UInt64) -> Action {
        switch event {
        case .attached(let connecting): return attached(connecting: connecting, now: now)
        case .connected(let requestSent): return connected(requestSent: requestSent, now: now)
        case .requestSent: return requestSent(now: now)
        case .responseHead: return responseHead(now: now)
        case .responseProgressed: responseProgressed(now: now); return .none
        case .requestProgressed: requestProgressed(now: now); return .none
        case .responseComplete: responseComplete(); return .none
        case .pooled(let until): return pooled(until: until)
        case .fire: return fire(now: now)
        }
    }

    /// An exchange takes the connection: a new one starts connecting (`connect_timeout`), a reused one waits for its
    /// request with no deadline. The stream idle bound of the previous exchange is forgotten.
    @inline(__always)
    public mutating func attached(connecting: Bool, now: UInt64) -> Action {
        streamIdle = 0
        if connecting {
            phase = .connecting
            deadline = now &+ limits.connect
            return .arm(deadline)
        }
        phase = .none
        deadline = 0
        return .none
    }

    /// Connected (and the TLS handshake done): `requestSent` when the whole request was handed over already.
    @inline(__always)
    public mutating func connected(requestSent sent: Bool, now: UInt64) -> Action {
        if sent { return requestSent(now: now) }
        phase = .none
        deadline = 0
        return .none
    }

    /// The whole request is sent (HTTP/1.1) or submitted (HTTP/2): `response_timeout` until the response head.
    @inline(__always)
    public mutating func requestSent(now: UInt64) -> Action {
        phase = .awaitingResponse
        deadline = now &+ limits.response
        return .arm(deadline)
    }

    /// The response head arrived: the gap between body reads is `stream_idle_timeout` when the route sets one, else
    /// `response_timeout`.
    @inline(__always)
    public mutating func responseHead(now: UInt64) -> Action {
        if streamIdle != 0 {
            phase = .streaming
            deadline = now &+ streamIdle
        } else {
            phase = .receiving
            deadline = now &+ limits.response
        }
        return .arm(deadline)
    }

    /// Response bytes were read (on an HTTP/2 stream: bytes moved either way): the current bound starts again. Only
    /// moves the deadline later, so the timer needs no work (it fires early and is armed again).
    @inline(__always)
    public mutating func responseProgressed(now: UInt64) {
        switch phase {
        case .awaitingResponse, .receiving: deadline = now &+ limits.response
        case .streaming: deadline = now &+ streamIdle
        case .none, .connecting, .pooled: break
        }
    }

    /// True when a request body write restarts the bound (`requestProgressed` does something): lets the owner skip
    /// the clock read otherwise.
    public var requestBytesCount: Bool { phase == .streaming }

    /// Request body bytes went out: movement on a stream once its response head is in; nothing otherwise.
    @inline(__always)
    public mutating func requestProgressed(now: UInt64) {
        if phase == .streaming { deadline = now &+ streamIdle }
    }

    /// The response is complete (or a tunnel took over): no deadline until the connection is pooled or reused.
    @inline(__always)
    public mutating func responseComplete() {
        phase = .none
        deadline = 0
    }

    /// Back in the pool until `until` (now + the server's `idle_timeout`, the pool's figure).
    @inline(__always)
    public mutating func pooled(until: UInt64) -> Action {
        phase = .pooled
        deadline = until
        return .arm(until)
    }

    /// The timer fired at `now`.
    public mutating func fire(now: UInt64) -> Action {
        switch RequestDeadlines.expiry(of: deadline, now: now) {
        case .none: return .none
        case .early(let at): return .arm(at)
        case .expired: break
        }
        switch phase {
        case .none: return .none
        case .connecting: return .fail(.connectTimeout)
        case .awaitingResponse, .receiving: return .fail(.responseTimeout)
        case .streaming: return .fail(.streamIdleTimeout)
        case .pooled: return .close
        }
    }
}
