@testable import Gateway
@testable import ProxyCore
import Testing

/// `H2UpstreamStreamState`: every event in every state, without an event loop, a session or a socket. The response
/// timeout is 10 ns; the machines are set up at time 0.
@Suite struct H2UpstreamStreamStateTests {
    typealias M = H2UpstreamStreamState
    typealias S = M.State

    /// A machine brought into `state` by events only (the state is never set from outside).
    static func machine(_ state: S, reused: Bool = false) -> M {
        var m = M(reused: reused, responseTimeout: 10)
        switch state {
        case .created:
            break
        case .active(let response, let request):
            _ = m.handle(.headSubmitted(endStream: request == .headOnly, now: 0))
            if request == .sending || request == .ended { _ = m.handle(.body(now: 0)) }
            if request == .ended { _ = m.handle(.end(now: 0)) }
            switch response {
            case .awaitingHead:
                break
            case .flowing:
                _ = m.handle(.responseHead(now: 0, streamIdleTimeout: 0))
            case .paused(let n):
                _ = m.handle(.responseHead(now: 0, streamIdleTimeout: 0))
                if n == 0 {
                    _ = m.handle(.clientFull)
                } else {
                    _ = m.handle(.responseData(count: n, now: 0))
                    _ = m.handle(.delivered(count: n, more: false))
                }
            }
        case .done:
            _ = m.handle(.abandon)
        }
        #expect(m.state == state, "setting up \(state)")
        return m
    }

    struct Row: CustomTestStringConvertible, Sendable {
        let from: S
        var reused = false
        let event: M.Event
        let to: S
        let action: M.Action
        var testDescription: String { "\(from)\(reused ? " reused" : "") + \(event) → \(to), \(action)" }
    }

    static let fresh = S.active(response: .awaitingHead, request: .headSent)
    static let flowing = S.active(response: .flowing, request: .headSent)

    static let rows: [Row] = [
        // created: the head is not in the session yet
        Row(from: .created, event: .headSubmitted(endStream: false, now: 5), to: fresh, action: .arm(15)),
        Row(from: .created, event: .headSubmitted(endStream: true, now: 5), to: .active(response: .awaitingHead, request: .headOnly), action: .arm(15)),
        Row(from: .created, event: .body(now: 1), to: .created, action: .none),
        Row(from: .created, event: .end(now: 1), to: .created, action: .none),
        Row(from: .created, event: .responseHead(now: 1, streamIdleTimeout: 0), to: .created, action: .none),
        Row(from: .created, event: .complete, to: .created, action: .none),
        Row(from: .created, event: .timer(now: 100), to: .created, action: .none),
        Row(from: .created, event: .fail(.badResponse), to: .done, action: .fail(.badResponse, reset: false)),
        Row(from: .created, event: .fail(.reset), to: .done, action: .fail(.reset, reset: false)),
        Row(from: .created, event: .abandon, to: .done, action: .abandon(reset: false)),
        Row(from: .created, event: .connectionFailed(.connectTimeout), to: .done, action: .fail(.connectTimeout, reset: false)),
        Row(from: .created, event: .connectionFailed(.reset), to: .done, action: .fail(.reset, reset: false)),
        Row(from: .created, reused: true, event: .connectionFailed(.reset), to: .done, action: .fail(.staleConnection, reset: false)),
        // head sent, body may follow, no response yet
        Row(from: fresh, event: .body(now: 3), to: .active(response: .awaitingHead, request: .sending), action: .send),
        Row(from: fresh, event: .end(now: 3), to: .active(response: .awaitingHead, request: .ended), action: .send),
        Row(from: fresh, event: .headSubmitted(endStream: false, now: 3), to: fresh, action: .none),
        Row(from: fresh, event: .responseHead(now: 4, streamIdleTimeout: 0), to: flowing, action: .deliverHead(arm: 14)),
        Row(from: fresh, event: .responseHead(now: 4, streamIdleTimeout: 50), to: flowing, action: .deliverHead(arm: 54)),
        Row(from: fresh, event: .streamFailed(.refused), to: fresh, action: .move),
        Row(from: fresh, event: .streamFailed(.malformed), to: .done, action: .fail(.badResponse, reset: true)),
        Row(from: fresh, event: .streamFailed(.reset(.cancel)), to: .done, action: .fail(.reset, reset: true)),
        Row(from: fresh, event: .streamFailed(.connectionClosed), to: .done, action: .fail(.reset, reset: true)),
        Row(from: fresh, reused: true, event: .streamFailed(.connectionClosed), to: .done, action: .fail(.staleConnection, reset: false)),
        Row(from: fresh, event: .connectionFailed(.reset), to: .done, action: .fail(.reset, reset: true)),
        Row(from: fresh, reused: true, event: .connectionFailed(.reset), to: .done, action: .fail(.staleConnection, reset: false)),
        Row(from: fresh, reused: true, event: .connectionFailed(.notH2), to: .done, action: .fail(.notH2, reset: true)),
        Row(from: fresh, event: .moved(reused: true), to: fresh, action: .none),
        Row(from: fresh, event: .fail(.staleConnection), to: .done, action: .fail(.staleConnection, reset: false)),
        Row(from: fresh, event: .abandon, to: .done, action: .abandon(reset: true)),
        Row(from: fresh, event: .complete, to: .done, action: .complete),
        Row(from: fresh, event: .clientDrained, to: fresh, action: .none),
        Row(from: fresh, event: .timer(now: 5), to: fresh, action: .arm(10)),
        Row(from: fresh, event: .timer(now: 10), to: .done, action: .fail(.responseTimeout, reset: true)),
        // head only (END_STREAM with the head): complete, still movable
        Row(from: .active(response: .awaitingHead, request: .headOnly), event: .body(now: 3), to: .active(response: .awaitingHead, request: .headOnly), action: .none),
        Row(from: .active(response: .awaitingHead, request: .headOnly), event: .end(now: 3), to: .active(response: .awaitingHead, request: .headOnly), action: .none),
        Row(from: .active(response: .awaitingHead, request: .headOnly), event: .streamFailed(.refused), to: .active(response: .awaitingHead, request: .headOnly), action: .move),
        // body given: no more moves
        Row(from: .active(response: .awaitingHead, request: .sending), event: .body(now: 3), to: .active(response: .awaitingHead, request: .sending), action: .send),
        Row(from: .active(response: .awaitingHead, request: .sending), event: .end(now: 3), to: .active(response: .awaitingHead, request: .ended), action: .send),
        Row(from: .active(response: .awaitingHead, request: .sending), event: .streamFailed(.refused), to: .done, action: .fail(.staleConnection, reset: false)),
        Row(from: .active(response: .awaitingHead, request: .ended), event: .body(now: 3), to: .active(response: .awaitingHead, request: .ended), action: .none),
        Row(from: .active(response: .awaitingHead, request: .ended), event: .end(now: 3), to: .active(response: .awaitingHead, request: .ended), action: .none),
        Row(from: .active(response: .awaitingHead, request: .ended), event: .streamFailed(.refused), to: .done, action: .fail(.staleConnection, reset: false)),
        // response flowing
        Row(from: flowing, event: .streamFailed(.refused), to: .done, action: .fail(.staleConnection, reset: false)),
        Row(from: flowing, reused: true, event: .streamFailed(.connectionClosed), to: .done, action: .fail(.reset, reset: true)),
        Row(from: flowing, reused: true, event: .connectionFailed(.reset), to: .done, action: .fail(.reset, reset: true)),
        Row(from: flowing, event: .body(now: 3), to: .active(response: .flowing, request: .sending), action: .send),
        Row(from: flowing, event: .responseHead(now: 4, streamIdleTimeout: 0), to: flowing, action: .deliverHead(arm: 14)),
        Row(from: flowing, event: .clientFull, to: .active(response: .paused(unconsumed: 0), request: .headSent), action: .none),
        Row(from: flowing, event: .responseData(count: 7, now: 3), to: flowing, action: .deliverData),
        Row(from: flowing, event: .delivered(count: 7, more: true), to: flowing, action: .consume(7)),
        Row(from: flowing, event: .delivered(count: 7, more: false), to: .active(response: .paused(unconsumed: 7), request: .headSent), action: .none),
        Row(from: flowing, event: .clientDrained, to: flowing, action: .none),
        Row(from: flowing, event: .complete, to: .done, action: .complete),
        Row(from: flowing, event: .abandon, to: .done, action: .abandon(reset: true)),
        Row(from: flowing, event: .timer(now: 10), to: .done, action: .fail(.responseTimeout, reset: true)),
        // response paused: bytes held until the client drains
        Row(from: .active(response: .paused(unconsumed: 7), request: .headSent), event: .responseData(count: 3, now: 3), to: .active(response: .paused(unconsumed: 7), request: .headSent), action: .deliverData),
        Row(from: .active(response: .paused(unconsumed: 7), request: .headSent), event: .delivered(count: 3, more: true), to: .active(response: .paused(unconsumed: 10), request: .headSent), action: .none),
        Row(from: .active(response: .paused(unconsumed: 7), request: .headSent), event: .clientDrained, to: flowing, action: .consume(7)),
        Row(from: .active(response: .paused(unconsumed: 7), request: .headSent), event: .clientFull, to: .active(response: .paused(unconsumed: 7), request: .headSent), action: .none),
        Row(from: .active(response: .paused(unconsumed: 0), request: .headSent), event: .clientDrained, to: flowing, action: .none),
        Row(from: .active(response: .paused(unconsumed: 7), request: .headSent), event: .complete, to: .done, action: .complete),
        // done: nothing moves; bytes still arriving are acknowledged so the connection's window stays open
        Row(from: .done, event: .responseData(count: 5, now: 3), to: .done, action: .consume(5)),
        Row(from: .done, event: .delivered(count: 5, more: true), to: .done, action: .consume(5)),
        Row(from: .done, event: .delivered(count: 5, more: false), to: .done, action: .none),
        Row(from: .done, event: .abandon, to: .done, action: .none),
        Row(from: .done, event: .complete, to: .done, action: .none),
        Row(from: .done, event: .streamFailed(.reset(.cancel)), to: .done, action: .none),
        Row(from: .done, event: .streamFailed(.refused), to: .done, action: .none),
        Row(from: .done, event: .connectionFailed(.reset), to: .done, action: .none),
        Row(from: .done, event: .fail(.badResponse), to: .done, action: .none),
        Row(from: .done, event: .timer(now: 100), to: .done, action: .none),
        Row(from: .done, event: .body(now: 3), to: .done, action: .none),
        Row(from: .done, event: .clientDrained, to: .done, action: .none),
        Row(from: .done, event: .headSubmitted(endStream: true, now: 3), to: .done, action: .none),
    ]

    @Test(arguments: rows)
    func transition(_ row: Row) {
        var m = Self.machine(row.from, reused: row.reused)
        #expect(m.handle(row.event) == row.action)
        #expect(m.state == row.to)
        if row.to == .done { #expect(m.deadline == .none, "an ended stream has no deadline") }
    }

    /// A refused stream moves at most `maxMoves` times; after a move, losing the new connection before the response
    /// means what that connection's history says.
    @Test func movesAreBounded() {
        var m = Self.machine(Self.fresh)
        for n in 1...M.maxMoves {
            #expect(m.handle(.streamFailed(.refused)) == .move, "move \(n)")
            #expect(m.handle(.moved(reused: n.isMultiple(of: 2))) == .none)
            #expect(m.moves == n)
        }
        #expect(m.lossBeforeResponse == .reset, "the last connection had served no stream")
        #expect(m.handle(.streamFailed(.refused)) == .fail(.staleConnection, reset: false))
        var r = Self.machine(Self.fresh)
        _ = r.handle(.moved(reused: true))
        #expect(r.handle(.streamFailed(.connectionClosed)) == .fail(.staleConnection, reset: false))
    }

    /// Bytes either way push the bound; a firing before it rearms; after the head the route's stream idle bound
    /// replaces `response_timeout` when set.
    @Test func deadlinesMoveWithBytes() {
        var m = Self.machine(Self.fresh)
        #expect(m.deadline == .armed(at: 10, after: 10, kind: .responseTimeout))
        #expect(m.handle(.body(now: 7)) == .send)
        #expect(m.deadline == .armed(at: 17, after: 10, kind: .responseTimeout))
        #expect(m.handle(.timer(now: 12)) == .arm(17))
        #expect(m.handle(.responseHead(now: 15, streamIdleTimeout: 50)) == .deliverHead(arm: 65))
        #expect(m.deadline == .armed(at: 65, after: 50, kind: .streamIdleTimeout))
        #expect(m.handle(.responseData(count: 1, now: 20)) == .deliverData)
        #expect(m.handle(.timer(now: 65)) == .arm(70))
        #expect(m.handle(.timer(now: 70)) == .fail(.streamIdleTimeout, reset: true))
        #expect(m.isDone)
    }
}
