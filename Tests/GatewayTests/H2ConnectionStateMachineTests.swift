@testable import Gateway
@testable import ProxyCore
import Testing

/// `H2ConnectionStateMachine` as a value: no socket, no nghttp2, no clock. The table gives, for each state, what
/// every event answers and the state after it.
@Suite struct H2ConnectionStateMachineTests {
    typealias Machine = H2ConnectionStateMachine
    typealias State = Machine.State

    enum Event: CaseIterable { case readable, hangup, request, flushWanted, idleRuleNoStreams, idleRuleStreams, close }

    static func feed(_ event: Event, _ m: inout Machine) -> String {
        switch event {
        case .readable: return "\(m.socketEvent(hangup: false))"
        case .hangup: return "\(m.socketEvent(hangup: true))"
        case .request: m.requestReceived(); return "-"
        case .flushWanted: return "\(m.flushWanted())"
        case .idleRuleNoStreams: return "\(m.idleRule(streamsOpen: false))"
        case .idleRuleStreams: return "\(m.idleRule(streamsOpen: true))"
        case .close: return "\(m.close())"
        }
    }

    static let rows: [(name: String, start: Machine, cells: [(String, State)])] = {
        var serving = Machine()
        serving.requestReceived()
        var closed = Machine()
        _ = closed.close()
        return [
            ("waiting for the first request", Machine(), [
                ("true", .awaitingFirstRequest), ("true", .awaitingFirstRequest), ("-", .serving),
                ("true", .awaitingFirstRequest), ("firstRequest", .awaitingFirstRequest),
                ("streamsOpen", .awaitingFirstRequest), ("true", .closed),
            ]),
            ("serving", serving, [
                ("true", .serving), ("true", .serving), ("-", .serving), ("true", .serving),
                ("nextRequest", .serving), ("streamsOpen", .serving), ("true", .closed),
            ]),
            ("closed", closed, [
                ("false", .closed), ("false", .closed), ("-", .closed), ("false", .closed), ("none", .closed),
                ("none", .closed), ("false", .closed),
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

    @Test func framesAreNotPulledWhileNghttp2DeliversNorOnceClosed() {
        var m = Machine()
        #expect(m.mayFlush)
        m.deliveryStarted()
        #expect(!m.mayFlush)
        m.deliveryEnded()
        #expect(m.mayFlush)
        _ = m.close()
        #expect(!m.mayFlush)
    }

    @Test func oneWriteIsScheduledPerBatch() {
        var m = Machine()
        let first = m.flushWanted(), second = m.flushWanted()
        #expect(first && !second)
        m.flushDue()
        let again = m.flushWanted()
        #expect(again)
    }

    @Test func anIdleConnectionThatNeverSentARequestClosesAtOnce() {
        let fresh = Machine()
        #expect(fresh.closesOnIdle(sessionFinished: false))
        var serving = Machine()
        serving.requestReceived()
        #expect(!serving.closesOnIdle(sessionFinished: false))  // GOAWAY, then in-flight frames finish
        #expect(serving.closesOnIdle(sessionFinished: true))
    }

    @Test func theEndOfTheClientsStreamIsKeptAndPassedOn() {
        #expect(Machine(peerEnded: true).peer == .ended)
        var m = Machine()
        _ = m.socketEvent(hangup: true)
        #expect(m.peer == .ended)
    }
}
