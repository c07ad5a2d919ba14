import ProxyCore
import EventLoop
import Glibc

/// One WebSocket tunnel after `101` (SPEC §6.1): the `tunnel` state of a client connection and of its upstream
/// connection (both hold it in their state enum, `HTTP1ConnectionStateMachine.State.tunnel` and `UpstreamConnectionStateMachine.State.tunnel`)
/// and the exchange that opened it. It performs what `TunnelState` decides: bytes read from one side go straight into
/// the other side's send buffer (no copy in between), each direction at most `Backpressure.highWater` bytes; a side
/// whose buffer is full is not read until it drains. Both connections keep their own sockets, transports (TLS
/// decrypts in place) and buffers; the relay only moves bytes between them.
///
/// Lifetime: the two connections and the relay hold each other until the tunnel ends; `finish` closes both sides,
/// which drops their states and breaks the cycle. It records the exchange once, with `status` 101, the bytes each
/// way and how it ended.
final class TunnelRelay: TunnelEndpoint {
    let client: ClientConnection
    let upstream: UpstreamConnection
    let exchange: Exchange
    private let loop: EventLoop
    /// The loop's shared buffers: a direction with nothing waiting reads into their scratch buffer (see `pump`).
    private let buffers: LoopBuffers
    private(set) var state: TunnelState
    /// The idle bound (`stream_idle_timeout`); lazy like the connections' timers: armed at the deadline known then,
    /// and a firing that finds bytes moved since re-arms itself at the new deadline.
    /// Unowned: `finish` cancels the timer, and nothing arms it after.
    private lazy var timer = LoopTimer { [unowned self] in self.timerFired() }
    /// Largest single read (the receiving buffer's room bounds it further).
    static let readSize = 64 * 1024

    init(client: ClientConnection, upstream: UpstreamConnection, exchange: Exchange, idleTimeout: UInt64,
         loop: EventLoop) {
        self.client = client
        self.upstream = upstream
        self.exchange = exchange
        self.loop = loop
        buffers = client.context.buffers
        // A FIN reported before the tunnel opened (in the same burst as the 101, say) brings no event again.
        state = TunnelState(now: loop.now, idleTimeout: idleTimeout, clientPeer: client.peerHungUp ? .ended : .open,
                            upstreamPeer: upstream.machine.peer)
    }

    /// Starts relaying: bytes each side sent after its head (already read) go to the other, then both are read.
    func start(clientLeftover: IOBuffer, upstreamLeftover: IOBuffer) {
        if !clientLeftover.isEmpty {
            state.moved(from: .client, clientLeftover.readableCount, now: loop.now)
            upstream.outBuf.append(clientLeftover.readable)
            clientLeftover.consume(clientLeftover.readableCount)
        }
        if !upstreamLeftover.isEmpty {
            state.moved(from: .upstream, upstreamLeftover.readableCount, now: loop.now)
            client.outBuf.append(upstreamLeftover.readable)
            upstreamLeftover.consume(upstreamLeftover.readableCount)
        }
        loop.schedule(timer, at: state.idleDeadline)
        flush(towards: .client)
        flush(towards: .upstream)
        pump(from: .client)
        pump(from: .upstream)
    }

    // MARK: events (from the connections' `handleEvent`)

    /// Any readiness of the client's socket: TLS may need either direction for either, so both are tried.
    func clientEvent(_ events: UInt32) {
        if events & Self.hangupEvents != 0 { state.hungUp(.client) }
        pump(from: .client)
        flush(towards: .client)
    }

    func upstreamEvent(_ events: UInt32) {
        if events & Self.hangupEvents != 0 { state.hungUp(.upstream) }
        pump(from: .upstream)
        flush(towards: .upstream)
    }

    private static let hangupEvents = EventLoop.readHangup | EventLoop.hangup | EventLoop.error

    // MARK: moving bytes

    /// A read of fewer bytes than asked for emptied a plain socket: with edge-triggered readiness the next bytes bring
    /// an event of their own, so reading again would only return `EAGAIN` (one system call per message relayed, a
    /// third more than nginx's). Not over TLS (a record may hold more than was asked for) nor once the peer's FIN was
    /// reported (its EOF comes with no further event).
    private func drainedBy(_ n: Int, asked: Int, from side: TunnelState.Side) -> Bool {
        guard n < asked else { return false }
        return state.readEmptied(from: side, read: n, asked: asked,
                                 tls: side == .client ? client.transport.isTLS : upstream.isTLS)
    }

    private func outBuf(_ side: TunnelState.Side) -> IOBuffer {
        side == .client ? client.outBuf : upstream.outBuf
    }

    /// Reads from `side` into the other side's send buffer while it has room, writing as it goes.
    private func pump(from side: TunnelState.Side) {
        // Unretained: both connections hold their send buffers in `let`s, and the relay holds both connections (a
        // retain and a release of it per read and per flush were a tenth of the relay's cost per message).
        unowned(unsafe) let out = outBuf(side.other)
        while !state.isDone {
            let room = state.room(from: side, buffered: out.readableCount)
            if room == 0 { return }
            let asked = min(room, Self.readSize)
            let result: IOResult
            var moved = false
            if out.isEmpty, let scratch = buffers.lendScratch() {
                // Nothing waits for the other side: read into the loop's scratch buffer and write from it at once,
                // keeping in the send buffer only what the other side did not take. A message relayed whole then
                // allocates nothing (reading into the send buffer reserved 64 KiB and gave it back again, a malloc and
                // a free per message and direction: ~1,300 of the ~3,200 instructions per echoed message). The scratch
                // buffer is back before anything else runs (a flush may pump the other direction).
                result = side == .client ? client.tunnelRead(into: scratch, max: asked)
                                         : upstream.tunnelRead(into: scratch, max: asked)
                var failed = false
                if case .processed(let n) = result {
                    state.moved(from: side, n, now: loop.now)
                    moved = true
                    let before = scratch.readableCount
                    switch side == .client ? upstream.tunnelWrite(from: scratch) : client.tunnelWrite(from: scratch) {
                    case .processed, .wouldBlock:
                        if scratch.readableCount < before { state.wrote(now: loop.now) }
                        if !scratch.isEmpty { out.append(scratch.readable) }
                    case .eof, .error:
                        failed = true
                    }
                }
                buffers.returnScratch()
                if failed { finish(side == .client ? .upstreamError : .clientError); return }
            } else {
                result = side == .client ? client.tunnelRead(into: out, max: asked)
                                         : upstream.tunnelRead(into: out, max: asked)
            }
            switch result {
            case .processed(let n):
                if !moved { state.moved(from: side, n, now: loop.now) }
                // A message relayed whole through the scratch buffer left nothing to write, and this direction is
                // open and not paused (it is being read): the flush would do nothing.
                if !(moved && out.isEmpty) { flush(towards: side.other) }
                if drainedBy(n, asked: asked, from: side) { return }
            case .wouldBlock:
                // A quiet tunnel holds no buffer (the read reserved one).
                if out.isEmpty { out.release() }
                return
            case .eof:
                state.ended(from: side)
                flush(towards: side.other)
                return
            case .error:
                finish(side == .client ? .clientError : .upstreamError)
                return
            }
        }
    }

    /// Writes what waits for `side`; passes a FIN on once nothing is left; resumes the paused direction into it.
    private func flush(towards side: TunnelState.Side) {
        guard !state.isDone else { return }
        unowned(unsafe) let out = outBuf(side)
        // Nothing to write, no end to pass on, no paused direction to resume (most events of a busy tunnel: the
        // message went through the scratch buffer).
        if out.isEmpty, state.flow(from: side.other) == .open(paused: false) { return }
        if !out.isEmpty {
            let before = out.readableCount
            let result = side == .client ? client.tunnelWrite() : upstream.tunnelWrite()
            switch result {
            case .processed, .wouldBlock:
                if out.readableCount < before { state.wrote(now: loop.now) }
                if out.isEmpty { out.release() }
            case .eof, .error:
                finish(side == .client ? .clientError : .upstreamError)
                return
            }
        }
        let sender = side.other
        if state.shouldShut(from: sender, buffered: out.readableCount) {
            // TLS cannot be half-closed here (its `close_notify` ends the session both ways): the tunnel closes.
            let halfClosed = side == .client ? client.tunnelShutdownWrite() : upstream.tunnelShutdownWrite()
            if !halfClosed { finish(.closed); return }
            if state.shut(from: sender) { finish(.closed) }
            return
        }
        if state.drained(towards: side, buffered: out.readableCount) { pump(from: sender) }
    }

    // MARK: ending

    private func timerFired() {
        switch state.timerFired(now: loop.now) {
        case .reschedule(let at): loop.schedule(timer, at: at)
        case .expired: closeBoth()
        case .none: break
        }
    }

    /// The tunnel ends (`outcome`): both sides close, the exchange is recorded. Idempotent.
    func finish(_ outcome: TunnelState.Outcome) {
        guard state.end(outcome) else { return }
        closeBoth()
    }

    private func closeBoth() {
        loop.cancel(timer)
        upstream.close()
        client.close()
        exchange.tunnelEnded(self)
    }
}
