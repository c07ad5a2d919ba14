/// The lifecycle of one upstream HTTP/1.1 connection as a value, beside the client connections' machines: its state
/// (connecting, carrying an exchange, idle in the pool, a tunnel, closed), what the current exchange has done so far
/// (where the connection came from, whether the request is all sent, whether response bytes arrived, whether the
/// response allows reuse) and the read gate. `UpstreamConnection` feeds it events and performs its answers; whether the
/// connection goes back to the pool is decided once, in `responseComplete`. Tested event by event
/// (`UpstreamConnectionStateMachineTests`).
struct UpstreamConnectionStateMachine: Equatable {
    enum State: Equatable {
        /// Connecting: the TCP connect (`tcp`), then the TLS handshake of an `https://` upstream (`tls`).
        case connecting(ConnectStage)
        /// Carrying an exchange's request out and its response back.
        case active
        /// In the pool, waiting for the next exchange (it must stay silent).
        case idle
        /// A WebSocket after `101`; the relay moves the bytes (UpstreamConnection+Tunnel.swift).
        case tunnel(TunnelRelay)
        case closed
    }

    enum ConnectStage: Equatable { case tcp, tls }

    /// Where the connection of this exchange came from: a failure before any response byte on a `pooled` one means it
    /// was stale (the upstream closed it meanwhile), and a body-less idempotent request is retried once.
    enum Origin: Equatable { case new, pooled }

    /// The request is being `sending` or is all `sent` (from then `response_timeout` runs until the head).
    enum RequestProgress: Equatable { case sending, sent }

    /// Whether any byte of the response has arrived.
    enum ResponseProgress: Equatable { case none, bytesSeen }

    typealias Persistence = HTTP1ConnectionStateMachine.Persistence
    typealias Input = HTTP1ConnectionStateMachine.Input
    typealias PeerStream = HTTP1ConnectionStateMachine.PeerStream

    private(set) var state: State
    private(set) var origin = Origin.new
    private(set) var request = RequestProgress.sending
    private(set) var response = ResponseProgress.none
    private(set) var persistence = Persistence.keepAlive
    private(set) var input = Input.flowing
    private(set) var peer = PeerStream.open

    /// `connected`: the TCP connect finished at once; `tls`: an `https://` upstream (its handshake follows).
    init(connected: Bool, tls: Bool) {
        state = connected ? (tls ? .connecting(.tls) : .active) : .connecting(.tcp)
    }

    var isClosed: Bool { state == .closed }

    /// The connection takes an exchange (`pooled`: from the pool). True when it is still connecting (the connect
    /// timeout runs), false when it is ready (no deadline until the request is sent).
    mutating func attach(pooled: Bool) -> Bool {
        origin = pooled ? .pooled : .new
        request = .sending
        response = .none
        persistence = .keepAlive
        _ = resumeReading()
        if state == .idle { state = .active }
        if case .connecting = state { return true }
        return false
    }

    /// Back in the pool (a closed connection stays closed).
    mutating func becameIdle() {
        if state != .closed { state = .idle }
    }

    /// The TCP connect finished (the TLS handshake follows for `https://`).
    mutating func tcpConnected(tls: Bool) {
        if state == .connecting(.tcp) { state = tls ? .connecting(.tls) : .active }
    }

    /// Connected (TCP, and TLS when used): true when the request is already all sent (its response timeout starts).
    mutating func connected() -> Bool {
        if case .connecting = state { state = .active }
        return request == .sent
    }

    /// The request is all sent: true when the response timeout starts now (connected, no response byte yet).
    mutating func requestSent() -> Bool {
        request = .sent
        return state == .active && response == .none
    }

    mutating func responseBytes() { response = .bytesSeen }

    /// The response head: `keepAlive` as it says (false for the answer to a WebSocket handshake).
    mutating func responseHead(keepAlive: Bool) { persistence = keepAlive ? .keepAlive : .close }

    /// The response body ends when the upstream closes.
    mutating func responseDelimitedByClose() { persistence = .close }

    /// The one reuse decision: true when the connection goes back to the pool (the response allowed it, the request
    /// was all sent, nothing is left in either buffer, it is still active); else it closes.
    func responseComplete(buffersEmpty: Bool) -> Bool {
        persistence == .keepAlive && request == .sent && buffersEmpty && state == .active
    }

    /// What a failed read or write means: a pooled connection that failed before any response byte was stale.
    var failure: UpstreamFailure { origin == .pooled && response == .none ? .staleConnection : .reset }

    // MARK: reading

    /// An epoll event: true when the read happens now (else it is owed until the client drains).
    mutating func socketEvent(hangup: Bool) -> Bool {
        if hangup { peer = .ended }
        if readHeld {
            input = .pausedReadOwed
            return false
        }
        return true
    }

    var readHeld: Bool { input == .paused || input == .pausedReadOwed }

    /// A read starts (what was owed is being taken).
    mutating func readStarting() { input = readHeld ? .paused : .flowing }

    /// The read loop found reading held: the read is owed.
    mutating func readStopped() { input = .pausedReadOwed }

    /// The client cannot take more of the response now.
    mutating func pauseReading() {
        switch input {
        case .flowing: input = .paused
        case .readOwed: input = .pausedReadOwed
        case .paused, .pausedReadOwed: break
        }
    }

    /// The client drained: false when reading was not held.
    mutating func resumeReading() -> Bool {
        switch input {
        case .flowing, .readOwed: return false
        case .paused: input = .flowing
        case .pausedReadOwed: input = .readOwed
        }
        return true
    }

    /// After resuming: a read owed is due now.
    var readOwed: Bool { input == .readOwed && state != .closed }

    // MARK: ending

    mutating func tunnelOpened(_ relay: TunnelRelay) { state = .tunnel(relay) }

    /// False when already closed; `tcpUp` (inout): the TCP connection was established (a TLS session to shut down).
    mutating func close() -> (closed: Bool, tcpUp: Bool) {
        let was = state
        guard was != .closed else { return (false, false) }
        state = .closed
        return (true, was != .connecting(.tcp))
    }
}
