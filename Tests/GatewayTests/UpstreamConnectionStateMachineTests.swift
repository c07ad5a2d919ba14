@testable import Gateway
@testable import ProxyCore
import Testing

/// `UpstreamConnectionStateMachine` as a value: no socket, no pool, no clock. A table of what every event answers in
/// every state, then the decisions that matter most: when the connection goes back to the pool, and when a failure
/// means a stale pooled connection (retried once) rather than a reset.
@Suite struct UpstreamConnectionStateMachineTests {
    typealias Machine = UpstreamConnectionStateMachine
    typealias State = Machine.State

    enum Event: CaseIterable { case attachPooled, tcpConnected, connected, requestSent, readable, idle, close }

    static func feed(_ event: Event, _ m: inout Machine) -> String {
        switch event {
        case .attachPooled: return "\(m.attach(pooled: true))"
        case .tcpConnected: m.tcpConnected(tls: true); return "-"
        case .connected: return "\(m.connected())"
        case .requestSent: return "\(m.requestSent())"
        case .readable: return "\(m.socketEvent(hangup: false))"
        case .idle: m.becameIdle(); return "-"
        case .close: return "\(m.close().closed)"
        }
    }

    nonisolated(unsafe) static let rows: [(name: String, start: Machine, cells: [(String, State)])] = {
        var idle = Machine(connected: true, tls: false)
        idle.becameIdle()
        var closed = Machine(connected: true, tls: false)
        _ = closed.close()
        return [
            // Columns: attachPooled, tcpConnected, connected, requestSent, readable, idle, close.
            ("TCP connecting", Machine(connected: false, tls: true), [
                ("true", .connecting(.tcp)), ("-", .connecting(.tls)), ("false", .active), ("false", .connecting(.tcp)),
                ("true", .connecting(.tcp)), ("-", .idle), ("true", .closed),
            ]),
            ("TLS handshaking", Machine(connected: true, tls: true), [
                ("true", .connecting(.tls)), ("-", .connecting(.tls)), ("false", .active),
                ("false", .connecting(.tls)), ("true", .connecting(.tls)), ("-", .idle), ("true", .closed),
            ]),
            ("active", Machine(connected: true, tls: false), [
                ("false", .active), ("-", .active), ("false", .active), ("true", .active), ("true", .active),
                ("-", .idle), ("true", .closed),
            ]),
            ("idle in the pool", idle, [
                ("false", .active), ("-", .idle), ("false", .idle), ("false", .idle), ("true", .idle), ("-", .idle),
                ("true", .closed),
            ]),
            ("closed", closed, [
                ("false", .closed), ("-", .closed), ("false", .closed), ("false", .closed), ("true", .closed),
                ("-", .closed), ("false", .closed),
            ]),
        ]
    }()

    @Test(arguments: rows.map(\.name)) func table(_ name: String) {
        let row = Self.rows.first { $0.name == name }!
        #expect(row.cells.count == Event.allCases.count)
        for (event, cell) in zip(Event.allCases, row.cells) {
            var m = row.start
            let got = Self.feed(event, &m)
            #expect(got == cell.0, "\(name) × \(event)")
            #expect(m.state == cell.1, "\(name) × \(event)")
        }
    }

    /// An active connection whose request is all sent, with a response head saying `keepAlive`.
    static func answered(keepAlive: Bool = true) -> Machine {
        var m = Machine(connected: true, tls: false)
        _ = m.attach(pooled: false)
        _ = m.requestSent()
        m.responseBytes()
        m.responseHead(keepAlive: keepAlive)
        return m
    }

    @Test func theConnectionGoesBackToThePoolOnlyWhenEverythingAllowsIt() {
        #expect(Self.answered().responseComplete(buffersEmpty: true))
        #expect(!Self.answered().responseComplete(buffersEmpty: false))
        #expect(!Self.answered(keepAlive: false).responseComplete(buffersEmpty: true))
        var closeDelimited = Self.answered()
        closeDelimited.responseDelimitedByClose()
        #expect(!closeDelimited.responseComplete(buffersEmpty: true))
        var unsent = Machine(connected: true, tls: false)
        _ = unsent.attach(pooled: false)
        unsent.responseHead(keepAlive: true)
        #expect(!unsent.responseComplete(buffersEmpty: true))  // answered before the request was all sent
    }

    @Test func aPooledConnectionFailingBeforeAnyResponseByteWasStale() {
        var pooled = Machine(connected: true, tls: false)
        pooled.becameIdle()
        _ = pooled.attach(pooled: true)
        #expect(pooled.failure == .staleConnection)
        pooled.responseBytes()
        #expect(pooled.failure == .reset)
        var fresh = Machine(connected: true, tls: false)
        _ = fresh.attach(pooled: false)
        #expect(fresh.failure == .reset)
        // The next exchange on the same connection starts afresh.
        pooled.becameIdle()
        _ = pooled.attach(pooled: true)
        #expect(pooled.failure == .staleConnection && pooled.request == .sending)
    }

    @Test func theResponseTimeoutStartsOnceTheRequestIsSentAndConnected() {
        var connecting = Machine(connected: false, tls: false)
        _ = connecting.attach(pooled: false)
        let early = connecting.requestSent()
        #expect(!early)  // still connecting: the connect timeout runs
        let now = connecting.connected()
        #expect(now)
        var answered = Machine(connected: true, tls: false)
        answered.responseBytes()
        let late = answered.requestSent()
        #expect(!late)  // a response already arriving has its own deadline
    }

    @Test func readingHeldForTheClientIsOwedAndTakenWhenItDrains() {
        var m = Self.answered()
        m.pauseReading()
        let now = m.socketEvent(hangup: true)
        #expect(!now && m.peer == .ended && m.input == .pausedReadOwed)
        let resumed = m.resumeReading()
        #expect(resumed && m.readOwed)
        m.readStarting()
        #expect(m.input == .flowing && !m.readOwed)
    }

    @Test func closingSaysWhetherTCPWasUp() {
        var connecting = Machine(connected: false, tls: true)
        #expect(connecting.close() == (closed: true, tcpUp: false))
        var handshaking = Machine(connected: true, tls: true)
        #expect(handshaking.close() == (closed: true, tcpUp: true))
        #expect(handshaking.close() == (closed: false, tcpUp: false))
    }
}
