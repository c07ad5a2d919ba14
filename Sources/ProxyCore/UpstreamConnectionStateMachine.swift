/// The lifecycle of one upstream HTTP/1.1 connection as a value, beside the client connections' machines: its state
/// (connecting, carrying an exchange, idle in the pool, a tunnel, closed), what the current exchange has done so far
/// (where the connection came from, whether the request is all sent, whether response bytes arrived, whether the
/// response allows reuse) and the read gate. `UpstreamConnection` feeds it events and performs its answers; whether the
/// connection goes back to the pool is decided once, in `responseComplete`. Tested event by event
/// (`UpstreamConnectionStateMachineTests`).
public struct UpstreamConnectionStateMachine: Equatable {
    public enum State: Equatable {
        /// Connecting: the TCP connect (`tcp`), then the TLS handshake of an `https://` upstream (`tls`).
        case connecting(ConnectStage)
        /// Carrying an exchange's request out and its response back.
        case active
        /// In the pool, waiting for the next exchange (it must stay silent).
        case idle
        /// A WebSocket after `101`; the relay moves the bytes (UpstreamConnection+Tunnel.swift).
        case tunnel(TunnelHandle)
        case closed
    }

    public enum ConnectStage: Equatable { case tcp, tls }

    /// Where the connection of this exchange came from: a failure before any response byte on a `pooled` one means it
    /// was stale (the upstream closed it meanwhile), and a body-less idempotent request is retried once.
    public enum Origin: Equatable { case new, pooled }

    /// The request is being `sending` or is all `sent` (from then `response_timeout` runs until the head).
    public enum RequestProgress: Equatable { case sending, sent }

    /// Whether any byte of the response has arrived.
    public enum ResponseProgress: Equatable { case none, bytesSeen }

    public typealias Persistence = ConnectionPersistence
    public typealias Input = ConnectionInput
    public typealias PeerStream = ConnectionPeerStream

    public private(set) var state: State
    public private(set) var origin = Origin.new
    public private(set) var request = RequestProgress.sending
    public private(set) var response = ResponseProgress.none
    public private(set) var persistence = Persistence.keepAlive
    public private(set) var input = Input.flowing
    public private(set) var peer = PeerStream.open

    /// `connected`: the TCP connect finished at once; `tls`: an `https://` upstream (its handshake follows).
    public init(connected: Bool, tls: Bool) {
        state = connected ? (tls ? .connecting(.tls) : .active) : .connecting(.tcp)
    }

    // Pattern matches, not `==`: the derived `==` of an enum with payloads is a call the optimiser does not inline
    // into `Gateway` (60,000 calls per 10,000 requests in callgrind's case A).
    public var isClosed: Bool { if case .closed = state { true } else { false } }
    public var isActive: Bool { if case .active = state { true } else { false } }
    public var isIdle: Bool { if case .idle = state { true } else { false } }

    /// The connection takes an exchange (`pooled`: from the pool). True when it is still connecting (the connect
    /// timeout runs), false when it is ready (no deadline until the request is sent).
    public mutating func attach(pooled: Bool) -> Bool {
        origin = pooled ? .pooled : .new
        request = .sending
        response = .none
        persistence = .keepAlive
        _ = resumeReading()
        if isIdle { state = .active }
        if case .connecting = state { return true }
        return false
    }

    /// Back in the pool (a closed connection stays closed).
    public mutating func becameIdle() {
        if !isClosed { state = .idle }
    }

    /// The TCP connect finished (the TLS handshake follows for `https://`).
    public mutating func tcpConnected(tls: Bool) {
        if case .connecting(.tcp) = state { state = tls ? .connecting(.tls) : .active }
    }

    /// Connected (TCP, and TLS when used): true when the request is already all sent (its response timeout starts).
    public mutating func connected() -> Bool {
        if case .connecting = state { state = .active }
        return request == .sent
    }

    /// The request is all sent: true when the response timeout starts now (connected, no response byte yet).
    public mutating func requestSent() -> Bool {
        request = .sent
        return isActive && response == .none
    }

    public mutating func responseBytes() { response = .bytesSeen }

    /// The response head: `keepAlive` as it says (false for the answer to a WebSocket handshake).
    public mutating func responseHead(keepAlive: Bool) { persistence = keepAlive ? .keepAlive : .close }

    /// The response body ends when the upstream closes.
    public mutating func responseDelimitedByClose() { persistence = .close }

    /// The one reuse decision: true when the connection goes back to the pool (the response allowed it, the request
    /// was all sent, nothing is left in either buffer, it is still active); else it closes.
    public func responseComplete(buffersEmpty: Bool) -> Bool {
        persistence == .keepAlive && request == .sent && buffersEmpty && isActive
    }

    /// What a failed read or write means: a pooled connection that failed before any response byte was stale.
    public var failure: UpstreamFailure { origin == .pooled && response == .none ? .staleConnection : .reset }

    // MARK: reading

    /// An epoll event: true when the read happens now (else it is owed until the client drains).
    public mutating func socketEvent(hangup: Bool) -> Bool {
        if hangup { peer = .ended }
        if readHeld {
            input = .pausedReadOwed
            return false
        }
        return true
    }

    public var readHeld: Bool { input == .paused || input == .pausedReadOwed }

    /// A read starts (what was owed is being taken).
    public mutating func readStarting() { input = readHeld ? .paused : .flowing }

    /// The read loop found reading held: the read is owed.
    public mutating func readStopped() { input = .pausedReadOwed }

    /// The client cannot take more of the response now.
    public mutating func pauseReading() { input.pause() }

    /// The client drained: false when reading was not held.
    public mutating func resumeReading() -> Bool { input.resume() }

    /// After resuming: a read owed is due now.
    public var readOwed: Bool { input == .readOwed && !isClosed }

    // MARK: ending

    public mutating func tunnelOpened(_ relay: TunnelHandle) { state = .tunnel(relay) }

    /// False when already closed; `tcpUp` (inout): the TCP connection was established (a TLS session to shut down).
    public mutating func close() -> (closed: Bool, tcpUp: Bool) {
        let was = state
        guard was != .closed else { return (false, false) }
        state = .closed
        return (true, was != .connecting(.tcp))
    }
}
