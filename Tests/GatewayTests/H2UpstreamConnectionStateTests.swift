@testable import Gateway
@testable import ProxyCore
import Testing

/// `H2UpstreamConnectionState`: every event in every state, without an event loop or a socket.
@Suite struct H2UpstreamConnectionStateTests {
    typealias M = H2UpstreamConnectionState
    typealias S = M.State

    /// A machine brought into `state` by events only (the state is never set from outside).
    static func machine(_ state: S, assumed: Int = 100) -> M {
        var m = M(assumedMaxConcurrent: assumed)
        func open(_ n: Int) { for _ in 0..<n { _ = m.handle(.streamOpened) } }
        switch state {
        case .connecting(let n, let retired):
            open(n)
            if retired { _ = m.handle(.retire) }
        case .open(let n, let max):
            _ = m.handle(.connected(h2: true))
            _ = m.handle(.settings(maxConcurrent: max))
            open(n)
        case .draining(let n):
            _ = m.handle(.connected(h2: true))
            open(n)
            _ = m.handle(.goAway)
        case .closing:
            // The last stream ends inside nghttp2's callbacks.
            _ = m.handle(.connected(h2: true))
            open(1)
            _ = m.handle(.goAway)
            m.sessionCallStarted()
            _ = m.handle(.streamEnded)
            m.sessionCallEnded()
        case .closed:
            _ = m.handle(.connectionLost)
        }
        #expect(m.state == state, "setting up \(state)")
        return m
    }

    struct Row: CustomTestStringConvertible, Sendable {
        let from: S
        let event: M.Event
        let to: S
        let action: M.Action
        var testDescription: String { "\(from) + \(event) → \(to), \(action)" }
    }

    static let rows: [Row] = [
        // connecting
        Row(from: .connecting(streams: 2, retired: false), event: .connected(h2: true), to: .open(streams: 2, maxConcurrent: 100), action: .flush),
        Row(from: .connecting(streams: 0, retired: false), event: .connected(h2: true), to: .open(streams: 0, maxConcurrent: 100), action: .armIdle),
        Row(from: .connecting(streams: 2, retired: false), event: .connected(h2: false), to: .closed, action: .failStreams(.notH2)),
        Row(from: .connecting(streams: 2, retired: true), event: .connected(h2: true), to: .draining(streams: 2), action: .flush),
        Row(from: .connecting(streams: 1, retired: false), event: .connectFailed(.tlsFailed), to: .closed, action: .failStreams(.tlsFailed)),
        Row(from: .connecting(streams: 1, retired: false), event: .connectDeadline, to: .closed, action: .failStreams(.connectTimeout)),
        Row(from: .connecting(streams: 1, retired: false), event: .streamOpened, to: .connecting(streams: 2, retired: false), action: .none),
        Row(from: .connecting(streams: 2, retired: false), event: .streamEnded, to: .connecting(streams: 1, retired: false), action: .none),
        Row(from: .connecting(streams: 1, retired: true), event: .streamEnded, to: .closed, action: .close),
        Row(from: .connecting(streams: 0, retired: false), event: .retire, to: .closed, action: .close),
        Row(from: .connecting(streams: 3, retired: false), event: .retire, to: .connecting(streams: 3, retired: true), action: .none),
        Row(from: .connecting(streams: 1, retired: false), event: .goAway, to: .connecting(streams: 1, retired: false), action: .none),
        Row(from: .connecting(streams: 1, retired: false), event: .settings(maxConcurrent: 5), to: .connecting(streams: 1, retired: false), action: .none),
        Row(from: .connecting(streams: 1, retired: false), event: .idleDeadline, to: .connecting(streams: 1, retired: false), action: .none),
        Row(from: .connecting(streams: 1, retired: false), event: .connectionLost, to: .closed, action: .failStreams(.reset)),
        // open
        Row(from: .open(streams: 1, maxConcurrent: 100), event: .settings(maxConcurrent: 5), to: .open(streams: 1, maxConcurrent: 5), action: .none),
        Row(from: .open(streams: 1, maxConcurrent: 5), event: .streamOpened, to: .open(streams: 2, maxConcurrent: 5), action: .none),
        Row(from: .open(streams: 2, maxConcurrent: 5), event: .streamEnded, to: .open(streams: 1, maxConcurrent: 5), action: .none),
        Row(from: .open(streams: 1, maxConcurrent: 5), event: .streamEnded, to: .open(streams: 0, maxConcurrent: 5), action: .armIdle),
        Row(from: .open(streams: 2, maxConcurrent: 5), event: .goAway, to: .draining(streams: 2), action: .none),
        Row(from: .open(streams: 0, maxConcurrent: 5), event: .goAway, to: .closed, action: .close),
        Row(from: .open(streams: 2, maxConcurrent: 5), event: .retire, to: .draining(streams: 2), action: .none),
        Row(from: .open(streams: 0, maxConcurrent: 5), event: .retire, to: .closed, action: .close),
        Row(from: .open(streams: 0, maxConcurrent: 5), event: .idleDeadline, to: .closed, action: .close),
        Row(from: .open(streams: 1, maxConcurrent: 5), event: .idleDeadline, to: .open(streams: 1, maxConcurrent: 5), action: .none),
        Row(from: .open(streams: 1, maxConcurrent: 5), event: .connected(h2: true), to: .open(streams: 1, maxConcurrent: 5), action: .none),
        Row(from: .open(streams: 1, maxConcurrent: 5), event: .connectFailed(.connectRefused), to: .open(streams: 1, maxConcurrent: 5), action: .none),
        Row(from: .open(streams: 1, maxConcurrent: 5), event: .connectDeadline, to: .open(streams: 1, maxConcurrent: 5), action: .none),
        Row(from: .open(streams: 3, maxConcurrent: 5), event: .connectionLost, to: .closed, action: .failStreams(.reset)),
        // draining
        Row(from: .draining(streams: 2), event: .streamEnded, to: .draining(streams: 1), action: .none),
        Row(from: .draining(streams: 1), event: .streamEnded, to: .closed, action: .close),
        Row(from: .draining(streams: 1), event: .streamOpened, to: .draining(streams: 2), action: .none),
        Row(from: .draining(streams: 1), event: .goAway, to: .draining(streams: 1), action: .none),
        Row(from: .draining(streams: 1), event: .retire, to: .draining(streams: 1), action: .none),
        Row(from: .draining(streams: 1), event: .settings(maxConcurrent: 9), to: .draining(streams: 1), action: .none),
        Row(from: .draining(streams: 1), event: .idleDeadline, to: .draining(streams: 1), action: .none),
        Row(from: .draining(streams: 1), event: .connectDeadline, to: .draining(streams: 1), action: .none),
        Row(from: .draining(streams: 1), event: .connectionLost, to: .closed, action: .failStreams(.reset)),
        Row(from: .connecting(streams: 1, retired: false), event: .tcpConnected, to: .connecting(streams: 1, retired: false), action: .none),
        Row(from: .open(streams: 1, maxConcurrent: 5), event: .tcpConnected, to: .open(streams: 1, maxConcurrent: 5), action: .none),
        // closing (a close owed until nghttp2 returns): nothing moves but `closeOwedDone`
        Row(from: .closing, event: .streamEnded, to: .closing, action: .none),
        Row(from: .closing, event: .connectionLost, to: .closing, action: .none),
        Row(from: .closing, event: .idleDeadline, to: .closing, action: .none),
        Row(from: .closing, event: .retire, to: .closing, action: .none),
        // closed: nothing moves
        Row(from: .closed, event: .streamEnded, to: .closed, action: .none),
        Row(from: .closed, event: .connectionLost, to: .closed, action: .none),
        Row(from: .closed, event: .connected(h2: true), to: .closed, action: .none),
        Row(from: .closed, event: .goAway, to: .closed, action: .none),
        Row(from: .closed, event: .idleDeadline, to: .closed, action: .none),
    ]

    @Test(arguments: rows)
    func transition(_ row: Row) {
        var m = Self.machine(row.from)
        #expect(m.handle(row.event) == row.action)
        #expect(m.state == row.to)
    }

    /// Streams are taken up to the server's limit, before SETTINGS up to the assumed one; never while draining or closed.
    @Test func acceptsStreamsUpToTheLimit() {
        #expect(Self.machine(.connecting(streams: 4, retired: false), assumed: 5).acceptsStream)
        #expect(!Self.machine(.connecting(streams: 5, retired: false), assumed: 5).acceptsStream)
        #expect(!Self.machine(.connecting(streams: 1, retired: true)).acceptsStream)
        #expect(Self.machine(.open(streams: 4, maxConcurrent: 5)).acceptsStream)
        #expect(!Self.machine(.open(streams: 5, maxConcurrent: 5)).acceptsStream)
        #expect(!Self.machine(.open(streams: 0, maxConcurrent: 0)).acceptsStream)
        #expect(!Self.machine(.draining(streams: 1)).acceptsStream)
        #expect(!Self.machine(.closed).acceptsStream)
        var m = M(assumedMaxConcurrent: 5)
        #expect(m.handle(.connected(h2: true)) == .armIdle)
        #expect(m.state == .open(streams: 0, maxConcurrent: 5), "the assumed limit holds until SETTINGS")
    }

    /// Rows while nghttp2 runs (`receive`, `send`): a close waits in `closing` until the call returned; a failure of the
    /// streams does not wait (it closes the socket, which nghttp2's `session.close()` reports to no stream left).
    struct DeliveryRow: CustomTestStringConvertible, Sendable {
        let from: S
        let event: M.Event
        let to: S
        let action: M.Action
        var testDescription: String { "running: \(from) + \(event) → \(to), \(action)" }
    }

    static let deliveryRows: [DeliveryRow] = [
        DeliveryRow(from: .draining(streams: 1), event: .streamEnded, to: .closing, action: .none),
        DeliveryRow(from: .open(streams: 0, maxConcurrent: 5), event: .goAway, to: .closing, action: .none),
        DeliveryRow(from: .open(streams: 0, maxConcurrent: 5), event: .idleDeadline, to: .closing, action: .none),
        DeliveryRow(from: .open(streams: 2, maxConcurrent: 5), event: .streamEnded, to: .open(streams: 1, maxConcurrent: 5), action: .none),
        DeliveryRow(from: .open(streams: 1, maxConcurrent: 5), event: .streamEnded, to: .open(streams: 0, maxConcurrent: 5), action: .armIdle),
        DeliveryRow(from: .open(streams: 2, maxConcurrent: 5), event: .connectionLost, to: .closed, action: .failStreams(.reset)),
        DeliveryRow(from: .draining(streams: 2), event: .goAway, to: .draining(streams: 2), action: .none),
    ]

    @Test(arguments: deliveryRows)
    func transitionWhileRunning(_ row: DeliveryRow) {
        var m = Self.machine(row.from)
        m.sessionCallStarted()
        #expect(m.delivery == .running)
        #expect(m.handle(row.event) == row.action)
        #expect(m.state == row.to)
        m.sessionCallEnded()
        #expect(m.delivery == .idle)
        #expect(m.closeOwed == (row.to == .closing))
        if row.to == .closing {
            #expect(m.isClosed, "nothing more is read")
            let first = m.closeOwedDone()
            #expect(first, "the caller closes the socket once")
            #expect(m.state == .closed)
            let second = m.closeOwedDone()
            #expect(!second, "owed once")
        }
    }

    /// The transport: TCP connecting → connected → ready (TCP and TLS up), from an asynchronous or an immediate connect;
    /// a connect failure or deadline leaves it where it was (the socket closes without a TLS `close_notify` when TCP
    /// never came up).
    @Test func transportSteps() {
        var m = M()
        #expect(m.transport == .tcpConnecting)
        #expect(m.handle(.tcpConnected) == .none)
        #expect(m.transport == .tcpConnected)
        #expect(m.handle(.connected(h2: true)) == .armIdle)
        #expect(m.transport == .ready)
        #expect(m.handle(.tcpConnected) == .none)
        #expect(m.transport == .ready, "never back")

        var immediate = M(tcpConnected: true)
        #expect(immediate.transport == .tcpConnected)
        #expect(immediate.handle(.connectDeadline) == .failStreams(.connectTimeout))
        #expect(immediate.transport == .tcpConnected)

        var refused = M()
        #expect(refused.handle(.connectFailed(.connectRefused)) == .failStreams(.connectRefused))
        #expect(refused.transport == .tcpConnecting)
    }

    /// One write per batch: scheduled once until it is due.
    @Test func flushTurn() {
        var m = M()
        #expect(m.flushTurn == .none)
        let first = m.flushWanted()
        #expect(first)
        #expect(m.flushTurn == .scheduled)
        let second = m.flushWanted()
        #expect(!second, "already scheduled")
        m.flushDue()
        #expect(m.flushTurn == .none)
        let afterDue = m.flushWanted()
        #expect(afterDue)
    }
}
