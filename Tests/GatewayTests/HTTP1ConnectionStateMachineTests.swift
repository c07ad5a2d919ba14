@testable import Gateway
@testable import ProxyCore
import Testing

/// `HTTP1ConnectionStateMachine` as a value: no socket, no loop, no clock. The table gives, for each state a client
/// HTTP/1.1 connection can be in, what every event does: the answer and the state after it, or `x` where no driver
/// produces the event (a body's end before the body was wanted, an exchange finishing with none under way). The
/// tunnel state is the relay's (`TunnelStateTests`); here it is entered and left only through `close`.
@Suite struct HTTP1ConnectionStateMachineTests {
    typealias Machine = HTTP1ConnectionStateMachine
    typealias State = Machine.State

    enum Event: CaseIterable {
        case read, hangup, tlsDone, headByte, head, bodyWanted, bodyComplete, finished, turn, drain, close
    }

    enum Cell: Equatable {
        case to(String, State)
        case x
    }

    /// Feeds `event` and describes the answer.
    static func feed(_ event: Event, _ m: inout Machine) -> String {
        switch event {
        case .read: return "\(m.socketEvent(hangup: false, readable: true))"
        case .hangup: return "\(m.socketEvent(hangup: true, readable: true))"
        case .tlsDone: return "\(m.handshakeDone(h2: false))"
        case .headByte: return "\(m.headBytes())"
        case .head: m.requestHead(keepAlive: true, draining: false); return "-"
        case .bodyWanted: return "\(m.bodyWanted())"
        case .bodyComplete: m.bodyComplete(); return "-"
        case .finished: return "\(m.exchangeFinished())"
        case .turn: return "\(m.inputTurnDue())"
        case .drain: return "\(m.drain(idle: true))"
        case .close: return "\(m.close())"
        }
    }

    static func machine(tls: Bool = false, _ steps: (inout Machine) -> Void = { _ in }) -> Machine {
        var m = Machine(tls: tls)
        steps(&m)
        return m
    }

    struct Row {
        let name: String
        let start: Machine
        let cells: [Cell]
    }

    static let serveRead = "serve(read: true)"
    nonisolated(unsafe) static let closed = Cell.to("close(wasHandshaking: false, relay: nil)", .closed)

    nonisolated(unsafe) static let rows: [Row] = {
        let x = Cell.x
        var rows: [Row] = []
        // Columns: read, hangup, tlsDone, headByte, head, bodyWanted, bodyComplete, finished, turn, drain, close.
        rows.append(Row(name: "TLS handshake", start: machine(tls: true), cells: [
            .to("handshake", .handshaking), .to("handshake", .handshaking), .to("read", .head(.first)),
            .to("false", .handshaking), x, .to("none", .handshaking), x, x, .to("none", .handshaking),
            .to("true", .handshaking), .to("close(wasHandshaking: true, relay: nil)", .closed),
        ]))
        rows.append(Row(name: "waiting for the first head", start: machine(), cells: [
            .to(serveRead, .head(.first)), .to(serveRead, .head(.first)), x,
            .to("true", .head(.started)), .to("-", .busy), .to("none", .head(.first)), x, x,
            .to("process", .head(.first)), .to("true", .head(.first)), closed,
        ]))
        rows.append(Row(name: "a head arriving", start: machine { _ = $0.headBytes() }, cells: [
            .to(serveRead, .head(.started)), .to(serveRead, .head(.started)), x,
            .to("false", .head(.started)), .to("-", .busy), .to("none", .head(.started)), x, x,
            .to("process", .head(.started)), .to("false", .head(.started)), closed,
        ]))
        rows.append(Row(name: "busy (admitting, answering)", start: machine { $0.requestHead(keepAlive: true, draining: false) },
                        cells: [
            .to(serveRead, .busy), .to(serveRead, .busy), x, .to("false", .busy), x, .to("start", .body), x,
            .to("awaitNextRequest", .head(.next)), .to("none", .busy), .to("false", .busy), closed,
        ]))
        rows.append(Row(name: "busy, input held", start: machine {
            $0.requestHead(keepAlive: true, draining: false)
            $0.pauseReading()
        }, cells: [
            .to("serve(read: false)", .busy), .to("clientGone", .busy), x, .to("false", .busy), x,
            .to("start", .body), x, .to("awaitNextRequest", .head(.next)), .to("none", .busy),
            .to("false", .busy), closed,
        ]))
        rows.append(Row(name: "reading the body", start: machine {
            $0.requestHead(keepAlive: true, draining: false)
            _ = $0.bodyWanted()
        }, cells: [
            .to(serveRead, .body), .to(serveRead, .body), x, .to("false", .body), x, .to("resume", .body),
            .to("-", .busy), .to("awaitNextRequest", .head(.next)), .to("none", .body), .to("false", .body), closed,
        ]))
        rows.append(Row(name: "busy, Connection: close", start: machine { $0.requestHead(keepAlive: false, draining: false) },
                        cells: [
            .to(serveRead, .busy), .to(serveRead, .busy), x, .to("false", .busy), x, .to("start", .body), x,
            .to("closeAfterOutput(mayLinger: true)", .closing), .to("none", .busy), .to("false", .busy), closed,
        ]))
        rows.append(Row(name: "closing once written", start: machine {
            $0.requestHead(keepAlive: false, draining: false)
            _ = $0.exchangeFinished()
        }, cells: [
            .to(serveRead, .closing), .to(serveRead, .closing), x, .to("false", .closing), x,
            .to("none", .closing), x, x, .to("none", .closing), .to("false", .closing), closed,
        ]))
        rows.append(Row(name: "lingering", start: machine {
            $0.requestHead(keepAlive: false, draining: false)
            _ = $0.exchangeFinished()
            $0.lingerStarted()
        }, cells: [
            .to("linger", .lingering), .to("linger", .lingering), x, .to("false", .lingering), x,
            .to("none", .lingering), x, .to("ignore", .lingering), .to("none", .lingering),
            .to("false", .lingering), closed,
        ]))
        rows.append(Row(name: "closed", start: machine { _ = $0.close() }, cells: [
            .to("ignore", .closed), .to("ignore", .closed), x, .to("false", .closed), x, .to("none", .closed), x,
            .to("ignore", .closed), .to("none", .closed), .to("false", .closed), .to("ignore", .closed),
        ]))
        return rows
    }()

    @Test(arguments: rows.map(\.name)) func table(_ name: String) {
        let row = Self.rows.first { $0.name == name }!
        #expect(row.cells.count == Event.allCases.count)
        for (event, cell) in zip(Event.allCases, row.cells) {
            guard case .to(let answer, let state) = cell else { continue }
            var m = row.start
            let got = Self.feed(event, &m)
            #expect(got == answer, "\(name) × \(event)")
            #expect(m.state == state, "\(name) × \(event)")
        }
    }

    // MARK: keep-alive, decided once

    static func finished(_ steps: (inout Machine) -> Void) -> Machine.FinishAction {
        var m = machine { $0.requestHead(keepAlive: true, draining: false) }
        steps(&m)
        return m.exchangeFinished()
    }

    @Test func whateverForbidsKeepAliveClosesAfterTheResponseAndNothingElseDoes() {
        let close = Machine.FinishAction.closeAfterOutput(mayLinger: true)
        #expect(Self.finished { _ in } == .awaitNextRequest)
        #expect(Self.finished { $0.responseHead(requestComplete: true, draining: false) } == .awaitNextRequest)
        #expect(Self.finished { $0.responseEnd(requestComplete: true) } == .awaitNextRequest)
        #expect(Self.finished { $0.ownAnswer(close: false) } == .awaitNextRequest)
        #expect(Self.finished { $0.responseHead(requestComplete: false, draining: false) } == close)
        #expect(Self.finished { $0.responseHead(requestComplete: true, draining: true) } == close)
        #expect(Self.finished { $0.responseDelimitedByClose() } == close)
        #expect(Self.finished { $0.responseEnd(requestComplete: false) } == close)
        #expect(Self.finished { $0.ownAnswer(close: true) } == close)
        #expect(Self.finished { _ = $0.drain(idle: false) } == close)
        var draining = Self.machine()
        draining.requestHead(keepAlive: true, draining: true)
        let drainingFinish = draining.exchangeFinished()
        #expect(drainingFinish == close)
        var malformed = Self.machine()
        malformed.noRequest()
        #expect(malformed.closesAfterResponse)
        let malformedFinish = malformed.exchangeFinished()
        #expect(malformedFinish == close)
    }

    @Test func aClientWhoseStreamEndedIsNotLingeredFor() {
        var m = Self.machine { $0.requestHead(keepAlive: false, draining: false) }
        _ = m.socketEvent(hangup: true, readable: true)
        let finish = m.exchangeFinished()
        #expect(finish == .closeAfterOutput(mayLinger: false))
        #expect(!m.mayLinger(hasPlan: true))
    }

    // MARK: reading and the input loop

    @Test func aReadAskedForInsideTheInputLoopIsOwedAndTakenWhenItEnds() {
        var m = Self.machine()
        let outer = m.inputLoopStarting(), inner = m.inputLoopStarting()
        #expect(outer && !inner)  // re-entrant: the outer run carries on
        let readNow = m.readStarting()
        #expect(!readNow && m.input == .readOwed)
        let owed = m.inputLoopEnded()
        #expect(owed)
        let reads = m.readStarting()
        #expect(reads && m.input == .flowing)
    }

    @Test func aHeldReadWithTheClientGoneClosesAndOtherwiseIsOwed() {
        var m = Self.machine { $0.requestHead(keepAlive: true, draining: false) }
        m.pauseReading()
        let gone = m.readHeldAfterRead(endPending: false)
        #expect(!gone && m.input == .pausedReadOwed)
        let goneNow = m.readHeldAfterRead(endPending: true)
        #expect(goneNow)
        let resumed = m.resumeReading()
        #expect(resumed && m.input == .readOwed)
        let again = m.resumeReading()
        #expect(!again)
    }

    @Test func theNextRequestStartsFromTheInputLoopOrFromAScheduledTurnOnce() {
        // Finished inside the input loop: that loop carries on, with reading no longer held.
        var inside = Self.machine { $0.requestHead(keepAlive: true, draining: false) }
        _ = inside.inputLoopStarting()
        inside.pauseReading()
        _ = inside.exchangeFinished()
        let insideTurn = inside.nextRequestReady(buffered: true)
        #expect(!insideTurn && !inside.readHeld)
        // Finished from outside with a pipelined request buffered: one turn at the end of the batch.
        var outside = Self.machine { $0.requestHead(keepAlive: true, draining: false) }
        _ = outside.exchangeFinished()
        let first = outside.nextRequestReady(buffered: true), second = outside.nextRequestReady(buffered: true)
        #expect(first && !second && outside.turn == .scheduled)
        let due = outside.inputTurnDue()
        #expect(due == .process && outside.turn == .none)
        // Nothing buffered and nothing held: no turn (the next edge reads).
        var idle = Self.machine { $0.requestHead(keepAlive: true, draining: false) }
        _ = idle.exchangeFinished()
        let idleTurn = idle.nextRequestReady(buffered: false)
        #expect(!idleTurn)
    }

    @Test func anH2PrefaceIsLookedForOnlyBeforeTheFirstRequest() {
        var m = Self.machine()
        #expect(m.mayBePreface)
        _ = m.headBytes()
        #expect(!m.mayBePreface)
        m.requestHead(keepAlive: true, draining: false)
        _ = m.exchangeFinished()
        #expect(m.state == .head(.next) && !m.mayBePreface)
        var tls = Self.machine(tls: true)
        let handshake = tls.handshakeDone(h2: true)
        #expect(handshake == .handOver && tls.state == .closed)
    }
}
