/// The lifecycle of one HTTP/2 connection to an upstream (`H2UpstreamConnection`), as a value type: events in, actions
/// out, no sockets, no clock (tests feed events and compare actions). The data lives in the states: the number of
/// streams the connection carries, and the server's `SETTINGS_MAX_CONCURRENT_STREAMS` once it is open. Beside the
/// state, as in `H2ConnectionStateMachine`: how far the transport is (`Transport`), whether nghttp2 is running
/// (`Delivery`: a close asked for meanwhile waits in `closing` until it returns) and whether a write is scheduled for
/// the end of the loop's batch (`FlushTurn`).
///
/// Rules (SPEC §6.1): streams may be opened while connecting (their HEADERS wait in the session) and while open, up to
/// the server's concurrency limit (`initialMaxConcurrent`, RFC 9113 §6.5.2's recommended minimum, until its SETTINGS
/// arrive); a connection that did not get `h2` by ALPN fails its streams (502); after the server's GOAWAY (or a reload
/// retiring the pool) it takes no new stream and closes when its last one ends; an idle open connection closes at its
/// idle deadline; the end of the byte stream or a connection error fails every stream left.
public struct H2UpstreamConnectionState: Equatable, Sendable {
    public enum State: Equatable, Sendable {
        /// TCP (and TLS) under way. `retired`: close as soon as the streams are done.
        case connecting(streams: Int, retired: Bool)
        /// Ready: `streams` open, at most `maxConcurrent` (the server's limit).
        case open(streams: Int, maxConcurrent: Int)
        /// GOAWAY received or retired: the `streams` left finish, no new one.
        case draining(streams: Int)
        /// Closed while nghttp2 was running (a callback ended the last stream): nghttp2 forbids freeing its session from
        /// a callback, so the last frames are written and the socket closed once the call returned (`closeOwedDone`).
        case closing
        case closed
    }

    /// How far the byte stream is: the TCP connect under way, TCP up (the TLS handshake, if any, next), or `ready`
    /// (TCP and TLS up: the session's frames may be written).
    public enum Transport: Equatable, Sendable { case tcpConnecting, tcpConnected, ready }

    /// nghttp2 is `running` (`receive` or `send`): it forbids calling either, or freeing the session, from its callbacks.
    public enum Delivery: Equatable, Sendable { case idle, running }

    /// A write is `scheduled` for the end of the loop's batch of events (`H2FlushScheduler`).
    public enum FlushTurn: Equatable, Sendable { case none, scheduled }

    public enum Event: Equatable, Sendable {
        /// The TCP connect completed (the TLS handshake, if any, follows).
        case tcpConnected
        /// TCP (and TLS) is up; `h2`: prior knowledge, or ALPN selected `h2`.
        case connected(h2: Bool)
        /// Connecting failed (refused, TLS) with this failure.
        case connectFailed(UpstreamFailure)
        /// The server's SETTINGS (its `SETTINGS_MAX_CONCURRENT_STREAMS`, capped by our own bound).
        case settings(maxConcurrent: Int)
        case streamOpened
        case streamEnded
        case goAway
        /// A reload replaced the pool, or shutdown.
        case retire
        /// EOF, a read or write error, or a session error.
        case connectionLost
        case connectDeadline
        case idleDeadline
    }

    public enum Action: Equatable, Sendable {
        case none
        /// Start writing the session's output (the preface and queued HEADERS).
        case flush
        /// No stream left on an open connection: arm the idle deadline.
        case armIdle
        /// Close the connection (nothing left on it).
        case close
        /// Close the connection and fail every stream on it with this failure.
        case failStreams(UpstreamFailure)
    }

    /// Streams a connection takes before the server's SETTINGS say otherwise, when nothing is known of the server.
    public static let initialMaxConcurrent = 100

    public private(set) var state = State.connecting(streams: 0, retired: false)
    public private(set) var transport: Transport
    public private(set) var delivery = Delivery.idle
    public private(set) var flushTurn = FlushTurn.none
    /// The limit assumed until this connection's SETTINGS arrive: the last one another connection to the same upstream
    /// heard (`H2UpstreamPool.knownMaxConcurrent`), else `initialMaxConcurrent`.
    public let assumedMaxConcurrent: Int

    /// `tcpConnected`: the socket's `connect` completed at once (a local upstream, often).
    public init(assumedMaxConcurrent: Int = Self.initialMaxConcurrent, tcpConnected: Bool = false) {
        self.assumedMaxConcurrent = max(1, assumedMaxConcurrent)
        transport = tcpConnected ? .tcpConnected : .tcpConnecting
    }

    /// Whether a new stream may be opened on this connection now.
    public var acceptsStream: Bool {
        switch state {
        case .connecting(let n, let retired): return !retired && n < assumedMaxConcurrent
        case .open(let n, let max): return n < max
        case .draining, .closing, .closed: return false
        }
    }

    public var streams: Int {
        switch state {
        case .connecting(let n, _), .open(let n, _), .draining(let n): return n
        case .closing, .closed: return 0
        }
    }

    /// Closed, or closing once nghttp2 returns: nothing more is read, no event moves it.
    public var isClosed: Bool { state == .closed || state == .closing }

    /// A close waits for nghttp2 to return (`closing`).
    public var closeOwed: Bool { state == .closing }

    /// nghttp2 is called (`receive`, `send`); its callbacks follow, synchronously.
    public mutating func sessionCallStarted() { delivery = .running }
    public mutating func sessionCallEnded() { delivery = .idle }

    /// The owed close is done now: true when there was one (the caller closes the socket).
    public mutating func closeOwedDone() -> Bool {
        guard state == .closing else { return false }
        state = .closed
        return true
    }

    /// A write is wanted: true when it must be scheduled (not scheduled yet).
    public mutating func flushWanted() -> Bool {
        guard flushTurn == .none else { return false }
        flushTurn = .scheduled
        return true
    }

    /// The scheduled write is due.
    public mutating func flushDue() { flushTurn = .none }

    /// Nothing left on the connection: `close`, or, from inside nghttp2 (a stream ended in one of its callbacks),
    /// `closing` until it returns.
    private mutating func close() -> Action {
        if delivery == .running {
            state = .closing
            return .none
        }
        state = .closed
        return .close
    }

    public mutating func handle(_ event: Event) -> Action {
        switch (state, event) {
        case (.closed, _), (.closing, _):
            return .none
        case (.connecting, .tcpConnected):
            transport = .tcpConnected
            return .none
        case (_, .tcpConnected):
            return .none

        case (.connecting(let n, let retired), .connected(let h2)):
            transport = .ready
            guard h2 else { state = .closed; return .failStreams(.notH2) }
            if retired {
                if n == 0 { return close() }
                state = .draining(streams: n)
                return .flush
            }
            state = .open(streams: n, maxConcurrent: assumedMaxConcurrent)
            return n == 0 ? .armIdle : .flush
        case (.connecting, .connectFailed(let kind)):
            state = .closed
            return .failStreams(kind)
        case (.connecting, .connectDeadline):
            state = .closed
            return .failStreams(.connectTimeout)
        case (.connecting(let n, let retired), .streamOpened):
            state = .connecting(streams: n + 1, retired: retired)
            return .none
        case (.connecting(let n, let retired), .streamEnded):
            // A stream abandoned before the connection was up.
            if retired && n <= 1 { return close() }
            state = .connecting(streams: max(0, n - 1), retired: retired)
            return .none
        case (.connecting(let n, _), .retire):
            if n == 0 { return close() }
            state = .connecting(streams: n, retired: true)
            return .none
        case (.connecting, .goAway), (.connecting, .settings), (.connecting, .idleDeadline):
            return .none

        case (.open(let n, _), .settings(let m)):
            state = .open(streams: n, maxConcurrent: max(0, m))
            return .none
        case (.open(let n, let m), .streamOpened):
            state = .open(streams: n + 1, maxConcurrent: m)
            return .none
        case (.open(let n, let m), .streamEnded):
            state = .open(streams: max(0, n - 1), maxConcurrent: m)
            return n <= 1 ? .armIdle : .none
        case (.open(let n, _), .goAway), (.open(let n, _), .retire):
            if n == 0 { return close() }
            state = .draining(streams: n)
            return .none
        case (.open(let n, _), .idleDeadline):
            if n > 0 { return .none }
            return close()
        case (.open, .connected), (.open, .connectFailed), (.open, .connectDeadline):
            return .none

        case (.draining(let n), .streamEnded):
            if n <= 1 { return close() }
            state = .draining(streams: n - 1)
            return .none
        case (.draining(let n), .streamOpened):
            // Only a retry racing a GOAWAY: counted so that its end is too.
            state = .draining(streams: n + 1)
            return .none
        case (.draining, .goAway), (.draining, .retire), (.draining, .settings), (.draining, .connected),
             (.draining, .connectFailed), (.draining, .connectDeadline), (.draining, .idleDeadline):
            return .none

        case (_, .connectionLost):
            state = .closed
            return .failStreams(.reset)
        }
    }
}
