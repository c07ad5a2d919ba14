@testable import Gateway
@testable import ProxyCore
@testable import Issuer
import Testing

/// The connection and pool state machines alone: no socket, no loop, a manual clock (plain numbers).
@Suite struct RequestDeadlinesTests {
    static let limits = RequestDeadlines.Limits(header: 10, body: 20, idle: 30)

    @Test func silentPlainConnectionIsClosedAfterHeaderTimeoutFromAccept() {
        var t = RequestDeadlines(limits: Self.limits, now: 100, tls: false)
        #expect(t.deadline == 110)
        do { let action = t.fire(now: 109, readPaused: false, responseStarted: false); #expect(action == .reschedule(110)) }
        do { let action = t.fire(now: 110, readPaused: false, responseStarted: false); #expect(action == .close) }
    }

    @Test func handshakeMustFinishWithinHeaderTimeoutThenIdleTimeoutApplies() {
        var t = RequestDeadlines(limits: Self.limits, now: 0, tls: true)
        do { let action = t.fire(now: 10, readPaused: false, responseStarted: false); #expect(action == .abort) }
        var u = RequestDeadlines(limits: Self.limits, now: 0, tls: true)
        u.handshakeDone(now: 5)
        #expect(u.deadline == 35)
        do { let action = u.fire(now: 35, readPaused: false, responseStarted: false); #expect(action == .close) }
    }

    @Test func slowHeadGets408HeaderTimeoutCountedFromItsFirstByte() {
        var t = RequestDeadlines(limits: Self.limits, now: 0, tls: false)
        t.headStarted(now: 8)
        do { let action = t.fire(now: 10, readPaused: false, responseStarted: false); #expect(action == .reschedule(18)) }
        do { let action = t.fire(now: 18, readPaused: false, responseStarted: false); #expect(action == .requestTimeout(reason: "header_timeout")) }
    }

    @Test func noClientDeadlineWhileTheUpstreamAnswers() {
        var t = RequestDeadlines(limits: Self.limits, now: 0, tls: false)
        t.headStarted(now: 1)
        t.headComplete()
        #expect(t.deadline == 0)
        do { let action = t.fire(now: 1_000, readPaused: false, responseStarted: false); #expect(action == .none) }
    }

    @Test func bodyTimeoutIsTheGapBetweenReads() {
        var t = RequestDeadlines(limits: Self.limits, now: 0, tls: false)
        t.headStarted(now: 0)
        t.headComplete()
        t.bodyProgressed(now: 5)
        t.bodyProgressed(now: 20)
        do { let action = t.fire(now: 25, readPaused: false, responseStarted: false); #expect(action == .reschedule(40)) }
        do { let action = t.fire(now: 40, readPaused: false, responseStarted: false); #expect(action == .requestTimeout(reason: "body_timeout")) }
    }

    @Test func bodyTimeoutWaitsWhileTheUpstreamHoldsReadingBack() {
        var t = RequestDeadlines(limits: Self.limits, now: 0, tls: false)
        t.bodyProgressed(now: 0)
        do { let action = t.fire(now: 20, readPaused: true, responseStarted: false); #expect(action == .reschedule(40)) }
        do { let action = t.fire(now: 40, readPaused: false, responseStarted: true); #expect(action == .abort) }
    }

    @Test func completeRequestStopsTheBodyDeadlineAndIdleFollowsTheResponse() {
        var t = RequestDeadlines(limits: Self.limits, now: 0, tls: false)
        t.bodyProgressed(now: 0)
        t.requestComplete()
        #expect(t.state == .busy)
        do { let action = t.fire(now: 500, readPaused: false, responseStarted: false); #expect(action == .none) }
        t.awaitNextRequest(now: 500)
        do { let action = t.fire(now: 529, readPaused: false, responseStarted: false); #expect(action == .reschedule(530)) }
        do { let action = t.fire(now: 530, readPaused: false, responseStarted: false); #expect(action == .close) }
    }

    @Test func closedConnectionIgnoresTheTimer() {
        var t = RequestDeadlines(limits: Self.limits, now: 0, tls: false)
        t.closed()
        do { let action = t.fire(now: 1_000, readPaused: false, responseStarted: false); #expect(action == .none) }
    }
}

@Suite struct UpstreamPoolStateTests {
    final class Conn { let id: Int; var usable = true; init(_ id: Int) { self.id = id } }

    /// New connects are a token bucket (burst = rate); idle connections are reused whatever the bucket holds.
    @Test func newConnectsAreRateBounded() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 4, addressCount: 1, maxConnectsPerSecond: 3, now: 0)
        for _ in 0..<3 {
            guard case .connect = pool.acquire(now: 0, isUsable: { $0.usable }) else { Issue.record("no connect"); return }
        }
        guard case .rateLimited = pool.acquire(now: 0, isUsable: { $0.usable }) else { Issue.record("not limited"); return }
        let kept = Conn(1)
        let released = pool.release(kept)
        #expect(released)
        guard case .reuse(let again, _) = pool.acquire(now: 0, isUsable: { $0.usable }) else { Issue.record("no reuse"); return }
        #expect(again === kept, "an idle connection is reused while connects are limited")
        guard case .connect = pool.acquire(now: 334_000_000, isUsable: { $0.usable }) else { Issue.record("no token after 1/3 s"); return }
        guard case .rateLimited = pool.acquire(now: 334_000_000, isUsable: { $0.usable }) else { Issue.record("not limited"); return }
        var unbounded = UpstreamPoolState<Conn>(maxIdle: 4, addressCount: 1, maxConnectsPerSecond: 0, now: 0)
        for _ in 0..<1000 {
            guard case .connect = unbounded.acquire(now: 0, isUsable: { $0.usable }) else { Issue.record("0 must be unbounded"); return }
        }
    }

    /// Issue 39: a `heavy` client (its address has another request in progress at the upstream) connects only while
    /// at least half of the burst is left (tokens 10 … 5 of 10), and a refusal takes no token; the rest stays for others.
    @Test func heavyClientsLeaveTheLastHalfOfTheConnectBudget() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 4, addressCount: 1, maxConnectsPerSecond: 10, now: 0)
        var heavyConnects = 0
        for _ in 0..<10 {
            if case .connect = pool.acquire(now: 0, heavy: true, isUsable: { $0.usable }) { heavyConnects += 1 }
        }
        #expect(heavyConnects == 6, "a heavy client took \(heavyConnects) of 10 connects")
        guard case .addressLimited = pool.acquire(now: 0, heavy: true, isUsable: { $0.usable }) else {
            Issue.record("heavy not limited"); return
        }
        for i in 0..<4 {
            guard case .connect = pool.acquire(now: 0, isUsable: { $0.usable }) else { Issue.record("light \(i) refused"); return }
        }
        guard case .rateLimited = pool.acquire(now: 0, isUsable: { $0.usable }) else { Issue.record("not limited"); return }
    }

    @Test func newConnectionsGoRoundRobinOverAddresses() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 4, addressCount: 3)
        var picked: [Int] = []
        for _ in 0..<4 {
            guard case let .connect(address, close) = pool.acquire(isUsable: { $0.usable }) else { Issue.record("no connect"); return }
            #expect(close.isEmpty)
            picked.append(address)
        }
        #expect(picked == [0, 1, 2, 0])
    }

    @Test func idleConnectionsAreReusedNewestFirst() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 4, addressCount: 1)
        let a = Conn(1), b = Conn(2)
        do { let kept = pool.release(a); #expect(kept) }
        do { let kept = pool.release(b); #expect(kept) }
        guard case let .reuse(first, _) = pool.acquire(isUsable: { $0.usable }) else { Issue.record("no reuse"); return }
        #expect(first === b)
        guard case let .reuse(second, _) = pool.acquire(isUsable: { $0.usable }) else { Issue.record("no reuse"); return }
        #expect(second === a)
        guard case .connect = pool.acquire(isUsable: { $0.usable }) else { Issue.record("expected a new connection"); return }
    }

    @Test func staleIdleConnectionsAreClosedOnTheWay() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 4, addressCount: 1)
        let a = Conn(1), b = Conn(2), c = Conn(3)
        _ = pool.release(a); _ = pool.release(b); _ = pool.release(c)
        b.usable = false; c.usable = false
        guard case let .reuse(conn, close) = pool.acquire(isUsable: { $0.usable }) else { Issue.record("no reuse"); return }
        #expect(conn === a)
        #expect(close.map(\.id) == [3, 2])
        #expect(pool.idle.isEmpty)
    }

    @Test func atMostMaxIdleStayAndNoneAfterRetire() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 2, addressCount: 1)
        do { let kept = pool.release(Conn(1)); #expect(kept) }
        do { let kept = pool.release(Conn(2)); #expect(kept) }
        do { let kept = pool.release(Conn(3)); #expect(!kept) }
        do { let closed = pool.retire(); #expect(closed.map(\.id) == [1, 2]) }
        do { let kept = pool.release(Conn(4)); #expect(!kept) }
        #expect(pool.idle.isEmpty)
    }

    @Test func removedIdleConnectionIsNotHandedOut() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 2, addressCount: 1)
        let a = Conn(1)
        _ = pool.release(a)
        pool.remove(a)
        guard case .connect = pool.acquire(isUsable: { _ in true }) else { Issue.record("handed out a removed connection"); return }
    }

    @Test func noAddressIsAFailureNotACrash() {
        var pool = UpstreamPoolState<Conn>(maxIdle: 2, addressCount: 0)
        guard case .noAddress = pool.acquire(isUsable: { _ in true }) else { Issue.record("expected noAddress"); return }
    }
}

/// The issuer's dashboard windows (docs/dashboard.md): an hour by minute, a day and a week by clock hour, with a
/// manual clock.
@Suite struct IssuerRecentCountsTests {
    @Test func windowsForgetWhatFellOut() {
        var recent = IssuerMetrics.Recent()
        let start = 1_800_000_000.0 - 1_800_000_000.0.truncatingRemainder(dividingBy: 3600)   // on an hour
        recent.add(at: start)
        recent.add(at: start + 59 * 60)
        #expect(recent.windows(at: start + 59 * 60) == (2, 2, 2))
        #expect(recent.windows(at: start + 60 * 60) == (1, 2, 2))   // the first minute left the hour
        recent.add(at: start + 30 * 3600)
        #expect(recent.windows(at: start + 30 * 3600) == (1, 1, 3))  // the first hour left the day
        #expect(recent.windows(at: start + 168 * 3600) == (0, 0, 1)) // only hour 30 is within the week
        #expect(recent.windows(at: start + 200 * 3600) == (0, 0, 0))
        // A lap later the same bucket is reused, not added to.
        recent.add(at: start + 168 * 3600 + 30 * 3600)
        #expect(recent.windows(at: start + 198 * 3600) == (1, 1, 1))
        #expect(recent.total == 4)
    }
}

/// The same deadlines as an HTTP/2 connection and stream use them.
@Suite struct RequestDeadlinesHTTP2Tests {
    static let limits = RequestDeadlines.Limits(header: 10, body: 20, idle: 30)

    @Test func aConnectionWaitsHeaderTimeoutForItsFirstStreamThenIdleTimeoutBetweenStreams() {
        var d = RequestDeadlines(limits: Self.limits, now: 0)
        d.awaitFirstRequest(now: 5)
        #expect(d.deadline == 15)
        do { let action = d.fire(now: 15, readPaused: false, responseStarted: false); #expect(action == .close) }
        d.headComplete()
        do { let action = d.fire(now: 1_000, readPaused: false, responseStarted: false); #expect(action == .none) }
        d.awaitNextRequest(now: 1_000)
        do { let action = d.fire(now: 1_010, readPaused: false, responseStarted: false); #expect(action == .reschedule(1_030)) }
        do { let action = d.fire(now: 1_030, readPaused: false, responseStarted: false); #expect(action == .close) }
    }

    @Test func aStreamsBodyGapRunsFromEachDataFrameAndStopsAtItsEnd() {
        var d = RequestDeadlines(limits: Self.limits, now: 0)
        d.headComplete()
        d.bodyProgressed(now: 3)
        d.bodyProgressed(now: 15)
        do { let action = d.fire(now: 23, readPaused: false, responseStarted: false); #expect(action == .reschedule(35)) }
        do { let action = d.fire(now: 35, readPaused: false, responseStarted: false); #expect(action == .requestTimeout(reason: "body_timeout")) }
        var e = RequestDeadlines(limits: Self.limits, now: 0)
        e.bodyProgressed(now: 0)
        e.requestComplete()
        do { let action = e.fire(now: 1_000, readPaused: false, responseStarted: false); #expect(action == .none) }
    }

    /// The deadline says when; the exchange says what it means: nothing while the client's input is held.
    @Test func anExpiredBodyGapIsTheExchangesToJudge() {
        var d = RequestDeadlines(limits: Self.limits, now: 0)
        var m = ExchangeStateMachineTests.machine(ExchangeStateMachineTests.post, bodyFollows: true)
        m.maxBodyBytes = 1 << 20
        d.bodyProgressed(now: 0)
        _ = m.appCheckPassed()
        _ = m.upstreamConnected(ExchangeStateMachineTests.up, backlog: Backpressure.highWater + 1)
        do { let action = d.fire(now: 20, readPaused: false, responseStarted: false); #expect(action == .requestTimeout(reason: "body_timeout")) }
        #expect(m.deadline() == .deferDeadline)
        d.bodyProgressed(now: 20)
        #expect(m.upstreamDrained() == .resumeInput)
        do { let action = d.fire(now: 40, readPaused: false, responseStarted: false); #expect(action == .requestTimeout(reason: "body_timeout")) }
        #expect(m.deadline() == .answerTimeout(abandon: ExchangeStateMachineTests.up))
    }
}
