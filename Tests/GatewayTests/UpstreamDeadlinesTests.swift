@testable import ProxyCore
import Testing

/// `UpstreamDeadlines` as a value: no socket, no loop, a manual clock (plain numbers). The table gives, for every
/// phase, what every event does: the action, the phase after it and the deadline after it. Limits: `connect_timeout`
/// 10, `response_timeout` 20; rows start at time 0, events come at 100 (the `fire` columns say their own time:
/// 1, before every deadline of the rows, and 1 000, after all of them).
@Suite struct UpstreamDeadlinesTests {
    typealias Deadlines = UpstreamDeadlines
    typealias Event = Deadlines.Event
    typealias Action = Deadlines.Action
    typealias Phase = Deadlines.Phase

    static let limits = Deadlines.Limits(connect: 10, response: 20)

    struct Cell: Equatable, Sendable {
        let action: Action
        let phase: Phase
        let deadline: UInt64
        init(_ action: Action, _ phase: Phase, _ deadline: UInt64) {
            self.action = action
            self.phase = phase
            self.deadline = deadline
        }
    }

    /// The events of the table, in column order, each with the time it comes at.
    static let events: [(Event, UInt64)] = [
        (.attached(connecting: true), 100), (.attached(connecting: false), 100),
        (.connected(requestSent: false), 100), (.connected(requestSent: true), 100),
        (.requestSent, 100), (.responseHead, 100), (.responseProgressed, 100), (.requestProgressed, 100),
        (.responseComplete, 100), (.pooled(until: 130), 100), (.fire, 1), (.fire, 1_000),
    ]

    struct Row: Sendable {
        let name: String
        let start: Deadlines
    }

    /// A value driven from a fresh connection by `events` at time 0; `streamIdle` is the route's, set after attaching.
    static func deadlines(streamIdle: UInt64 = 0, _ events: [Event]) -> Deadlines {
        var d = Deadlines(limits: limits)
        for e in events {
            _ = d.handle(e, now: 0)
            if case .attached = e { d.streamIdle = streamIdle }
        }
        return d
    }

    static let rows: [Row] = [
        Row(name: "none (reused, request not sent)", start: deadlines([.attached(connecting: false)])),
        Row(name: "connecting", start: deadlines([.attached(connecting: true)])),
        Row(name: "awaiting the response", start: deadlines([.attached(connecting: false), .requestSent])),
        Row(name: "awaiting the response, stream idle 5",
            start: deadlines(streamIdle: 5, [.attached(connecting: false), .requestSent])),
        Row(name: "receiving", start: deadlines([.attached(connecting: false), .requestSent, .responseHead])),
        Row(name: "streaming, stream idle 5",
            start: deadlines(streamIdle: 5, [.attached(connecting: false), .requestSent, .responseHead])),
        Row(name: "pooled until 30", start: deadlines([.pooled(until: 30)])),
    ]

    /// Every row's cells, in the rows' order. The columns that do not depend on the phase come first in each row.
    static let cells: [[Cell]] = {
        let none = Cell(.none, .none, 0)
        let connect = Cell(.arm(110), .connecting, 110)
        let sent = Cell(.arm(120), .awaitingResponse, 120)
        let pooled = Cell(.arm(130), .pooled, 130)
        return [
            // none
            [connect, none, none, sent, sent, Cell(.arm(120), .receiving, 120),
             none, none, none, pooled, none, none],
            // connecting (deadline 10)
            [connect, none, none, sent, sent, Cell(.arm(120), .receiving, 120),
             Cell(.none, .connecting, 10), Cell(.none, .connecting, 10), none, pooled,
             Cell(.arm(10), .connecting, 10), Cell(.fail(.connectTimeout), .connecting, 10)],
            // awaiting the response (deadline 20)
            [connect, none, none, sent, sent, Cell(.arm(120), .receiving, 120),
             Cell(.none, .awaitingResponse, 120), Cell(.none, .awaitingResponse, 20), none, pooled,
             Cell(.arm(20), .awaitingResponse, 20), Cell(.fail(.responseTimeout), .awaitingResponse, 20)],
            // awaiting the response with a stream idle bound: the head switches to it; request bytes do not count yet
            [connect, none, none, sent, sent, Cell(.arm(105), .streaming, 105),
             Cell(.none, .awaitingResponse, 120), Cell(.none, .awaitingResponse, 20), none, pooled,
             Cell(.arm(20), .awaitingResponse, 20), Cell(.fail(.responseTimeout), .awaitingResponse, 20)],
            // receiving (deadline 20): request bytes do not restart `response_timeout`
            [connect, none, none, sent, sent, Cell(.arm(120), .receiving, 120),
             Cell(.none, .receiving, 120), Cell(.none, .receiving, 20), none, pooled,
             Cell(.arm(20), .receiving, 20), Cell(.fail(.responseTimeout), .receiving, 20)],
            // streaming (deadline 5): bytes either way restart the one idle bound
            [connect, none, none, sent, sent, Cell(.arm(105), .streaming, 105),
             Cell(.none, .streaming, 105), Cell(.none, .streaming, 105), none, pooled,
             Cell(.arm(5), .streaming, 5), Cell(.fail(.streamIdleTimeout), .streaming, 5)],
            // pooled (deadline 30): an expired idle connection is closed, no exchange fails
            [connect, none, none, sent, sent, Cell(.arm(120), .receiving, 120),
             Cell(.none, .pooled, 30), Cell(.none, .pooled, 30), none, pooled,
             Cell(.arm(30), .pooled, 30), Cell(.close, .pooled, 30)],
        ]
    }()

    @Test func everyPhaseHasACellForEveryEvent() {
        #expect(Self.cells.count == Self.rows.count)
        for (row, cells) in zip(Self.rows, Self.cells) { #expect(cells.count == Self.events.count, "\(row.name)") }
        let phases = Self.rows.map(\.start.phase)
        for phase in [Phase.none, .connecting, .awaitingResponse, .receiving, .streaming, .pooled] {
            #expect(phases.contains(phase), "\(phase)")
        }
    }

    @Test(arguments: rows.indices)
    func table(_ index: Int) {
        let row = Self.rows[index]
        for ((event, now), cell) in zip(Self.events, Self.cells[index]) {
            var d = row.start
            let action = d.handle(event, now: now)
            #expect(Cell(action, d.phase, d.deadline) == cell, "\(row.name), \(event) at \(now)")
        }
    }

    // MARK: what the table's single columns do not show

    /// A deadline has expired once `now` reaches it, not one nanosecond later: the rule `RequestDeadlines` shares.
    @Test func aDeadlineExpiresTheMomentItIsReached() {
        var d = Self.deadlines([.attached(connecting: false), .requestSent])
        #expect(d.fire(now: 19) == .arm(20))
        #expect(d.fire(now: 20) == .fail(.responseTimeout))
        #expect(RequestDeadlines.expiry(of: 0, now: 5) == .none)
        #expect(RequestDeadlines.expiry(of: 20, now: 19) == .early(20))
        #expect(RequestDeadlines.expiry(of: 20, now: 20) == .expired)
    }

    /// Each body read restarts the gap; the timer armed for the first deadline fires early and is armed again.
    @Test func responseTimeoutIsTheGapBetweenBodyReads() {
        var d = Self.deadlines([.attached(connecting: false), .requestSent, .responseHead])
        d.responseProgressed(now: 15)
        d.responseProgressed(now: 30)
        #expect(d.fire(now: 20) == .arm(50))
        #expect(d.fire(now: 49) == .arm(50))
        #expect(d.fire(now: 50) == .fail(.responseTimeout))
    }

    /// A connect that ends before the request is fully handed over runs no deadline until `requestSent`.
    @Test func connectedBeforeTheRequestIsSentWaitsWithoutADeadline() {
        var d = Self.deadlines([.attached(connecting: true)])
        #expect(d.connected(requestSent: false, now: 4) == .none)
        #expect(d.fire(now: 1_000) == .none)
        #expect(d.requestSent(now: 1_000) == .arm(1_020))
    }

    /// The route's stream idle bound belongs to one exchange: the next exchange on the connection starts without it.
    @Test func attachingForgetsThePreviousExchangesStreamIdleBound() {
        var d = Self.deadlines(streamIdle: 5, [.attached(connecting: false), .requestSent, .responseHead])
        d.responseComplete()
        _ = d.pooled(until: 30)
        #expect(d.attached(connecting: false, now: 10) == .none)
        #expect(d.streamIdle == 0)
        _ = d.requestSent(now: 10)
        #expect(d.responseHead(now: 12) == .arm(32))
        #expect(d.phase == .receiving)
    }

    /// Connect and response timeouts are answered 504 `upstream_timeout`; a stream gone silent, like every other
    /// failure, is not a gateway timeout (502).
    @Test func onlyConnectAndResponseTimeoutsAreGatewayTimeouts() {
        #expect(Deadlines.isGatewayTimeout(.connectTimeout))
        #expect(Deadlines.isGatewayTimeout(.responseTimeout))
        #expect(!Deadlines.isGatewayTimeout(.streamIdleTimeout))
        #expect(!Deadlines.isGatewayTimeout(.reset))
        #expect(!Deadlines.isGatewayTimeout(.connectRefused))
    }
}
