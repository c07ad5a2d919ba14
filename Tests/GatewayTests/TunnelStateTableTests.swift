@testable import ProxyCore
import Testing

/// `TunnelState` as a table, like the exchange's and the connections' machines: for every state a tunnel can be in,
/// what every event does (the action and the state after it). No socket, no loop; `now` comes with the events. The
/// state is what the relay acts on: each direction's flow and the outcome (the byte counts are `TunnelStateTests`').
@Suite struct TunnelStateTableTests {
    typealias Event = TunnelState.Event
    typealias Action = TunnelState.Action
    typealias Flow = TunnelState.Flow

    struct Snapshot: Equatable, CustomStringConvertible {
        let fromClient: Flow
        let fromUpstream: Flow
        let outcome: TunnelState.Outcome?
        init(_ s: TunnelState) {
            fromClient = s.fromClient
            fromUpstream = s.fromUpstream
            outcome = s.outcome
        }
        init(_ c: Flow, _ u: Flow, _ outcome: TunnelState.Outcome? = nil) {
            fromClient = c
            fromUpstream = u
            self.outcome = outcome
        }
        var description: String { "\(fromClient) / \(fromUpstream) / \(outcome.map(\.rawValue) ?? "-")" }
    }

    /// Idle bound 10 ns from 0; 100 bytes of room each way, resumed at 20.
    static func tunnel(_ events: [Event] = []) -> TunnelState {
        var s = TunnelState(now: 0, idleTimeout: 10, highWater: 100, lowWater: 20)
        for e in events { _ = s.handle(e) }
        return s
    }

    /// The columns.
    static let events: [Event] = [
        .read(from: .client, buffered: 0), .read(from: .client, buffered: 100), .read(from: .upstream, buffered: 0),
        .moved(from: .client, count: 5, now: 5), .ended(from: .client), .drained(towards: .upstream, buffered: 20),
        .shut(from: .client), .end(.shutdown), .timer(now: 9), .timer(now: 10),
    ]

    struct Row: Sendable {
        let name: String
        let start: TunnelState
        let cells: [(Action, Snapshot)]
    }

    static let rows: [Row] = {
        let open = Flow.open(paused: false), paused = Flow.open(paused: true)
        var rows: [Row] = []
        rows.append(Row(name: "both directions open", start: tunnel(), cells: [
            (.read(max: 100), Snapshot(open, open)),
            (.pause, Snapshot(paused, open)),
            (.read(max: 100), Snapshot(open, open)),
            (.none, Snapshot(open, open)),
            (.none, Snapshot(.ending, open)),
            (.none, Snapshot(open, open)),
            (.none, Snapshot(.shut, open)),
            (.finish(.shutdown), Snapshot(open, open, .shutdown)),
            (.reschedule(10), Snapshot(open, open)),
            (.finish(.idleTimeout), Snapshot(open, open, .idleTimeout)),
        ]))
        // A paused direction is read again only after `drained` resumed it (the relay does not pump it before).
        rows.append(Row(name: "client's direction paused", start: tunnel([.read(from: .client, buffered: 100)]), cells: [
            (.read(max: 100), Snapshot(paused, open)),
            (.none, Snapshot(paused, open)),
            (.read(max: 100), Snapshot(paused, open)),
            (.none, Snapshot(paused, open)),
            (.none, Snapshot(.ending, open)),
            (.resume, Snapshot(open, open)),
            (.none, Snapshot(.shut, open)),
            (.finish(.shutdown), Snapshot(paused, open, .shutdown)),
            (.reschedule(10), Snapshot(paused, open)),
            (.finish(.idleTimeout), Snapshot(paused, open, .idleTimeout)),
        ]))
        rows.append(Row(name: "upstream's direction ending", start: tunnel([.ended(from: .upstream)]), cells: [
            (.read(max: 100), Snapshot(open, .ending)),
            (.pause, Snapshot(paused, .ending)),
            (.none, Snapshot(open, .ending)),
            (.none, Snapshot(open, .ending)),
            (.none, Snapshot(.ending, .ending)),
            (.none, Snapshot(open, .ending)),
            (.none, Snapshot(.shut, .ending)),
            (.finish(.shutdown), Snapshot(open, .ending, .shutdown)),
            (.reschedule(10), Snapshot(open, .ending)),
            (.finish(.idleTimeout), Snapshot(open, .ending, .idleTimeout)),
        ]))
        rows.append(Row(name: "upstream's direction shut", start: tunnel([.ended(from: .upstream), .shut(from: .upstream)]),
                        cells: [
            (.read(max: 100), Snapshot(open, .shut)),
            (.pause, Snapshot(paused, .shut)),
            (.none, Snapshot(open, .shut)),
            (.none, Snapshot(open, .shut)),
            (.none, Snapshot(.ending, .shut)),
            (.none, Snapshot(open, .shut)),
            (.closeBoth, Snapshot(.shut, .shut)),
            (.finish(.shutdown), Snapshot(open, .shut, .shutdown)),
            (.reschedule(10), Snapshot(open, .shut)),
            (.finish(.idleTimeout), Snapshot(open, .shut, .idleTimeout)),
        ]))
        rows.append(Row(name: "both shut, not yet ended",
                        start: tunnel([.ended(from: .upstream), .shut(from: .upstream), .ended(from: .client),
                                       .shut(from: .client)]),
                        cells: [
            (.none, Snapshot(.shut, .shut)),
            (.none, Snapshot(.shut, .shut)),
            (.none, Snapshot(.shut, .shut)),
            (.none, Snapshot(.shut, .shut)),
            (.none, Snapshot(.shut, .shut)),
            (.none, Snapshot(.shut, .shut)),
            (.closeBoth, Snapshot(.shut, .shut)),
            (.finish(.shutdown), Snapshot(.shut, .shut, .shutdown)),
            (.reschedule(10), Snapshot(.shut, .shut)),
            (.finish(.idleTimeout), Snapshot(.shut, .shut, .idleTimeout)),
        ]))
        // Ended: nothing moves it any more, whatever comes late.
        let closed = tunnel([.ended(from: .upstream), .shut(from: .upstream), .ended(from: .client), .shut(from: .client),
                             .end(.closed)])
        rows.append(Row(name: "ended closed", start: closed, cells: events.map { _ in (.none, Snapshot(closed)) }))
        let idle = tunnel([.timer(now: 10)])
        rows.append(Row(name: "ended by the idle bound", start: idle, cells: events.map { _ in (.none, Snapshot(idle)) }))
        return rows
    }()

    @Test func everyRowHasACellForEveryEvent() {
        for row in Self.rows { #expect(row.cells.count == Self.events.count, "\(row.name)") }
    }

    @Test(arguments: rows.indices)
    func table(_ index: Int) {
        let row = Self.rows[index]
        for (event, (action, after)) in zip(Self.events, row.cells) {
            var s = row.start
            let got = s.handle(event)
            #expect(got == action, "\(row.name), \(event)")
            #expect(Snapshot(s) == after, "\(row.name), \(event)")
        }
    }
}
