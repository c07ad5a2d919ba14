/// The state of one WebSocket tunnel after `101` (SPEC §6.1), as a value: what each direction may do, the bytes
/// relayed, the idle deadline and how it ended. No socket and no clock (`now` comes with every event), so each rule
/// is unit-tested without a loop (`TunnelStateTests`); `TunnelRelay` performs what it decides.
///
/// Rules:
/// - Each direction buffers at most `highWater` bytes towards its receiving side: a read takes at most `room`, and
///   at no room the direction is `paused` (its sending side is not read, so TCP pushes back on the sender) until
///   the receiving side's buffer drains to `lowWater`.
/// - A sending side's FIN (end of its stream) makes its direction `ending`: what is buffered is written, then the
///   receiving side's write half is shut (`shut`). Both directions shut: the tunnel ended `closed`.
/// - An error on either side, `idleTimeout` without a byte moving either way, or shutdown closes both at once.
/// - A side whose socket reported the peer's FIN (or an error) is `hungUp`: its end of stream brings no edge of its own,
///   so from then on it is read until `EAGAIN` or EOF (`readEmptied`).
public struct TunnelState: Equatable, Sendable {
    public enum Side: Equatable, Sendable {
        case client, upstream
        public var other: Side { self == .client ? .upstream : .client }
    }

    /// One direction, named by the side that sends into it.
    public enum Flow: Equatable, Sendable {
        /// Relaying. `paused`: the receiving side's buffer is full; the sending side is not read.
        case open(paused: Bool)
        /// The sending side ended its stream; the buffered bytes are being written before the write half is shut.
        case ending
        /// The receiving side's write half is shut.
        case shut
    }

    /// How a tunnel ended (the `tunnel_end` log field).
    public enum Outcome: String, Equatable, Sendable {
        /// Both sides ended their streams (each FIN passed on).
        case closed
        /// No byte moved either way for the idle bound.
        case idleTimeout = "idle_timeout"
        /// Reading from or writing to the client failed (a reset).
        case clientError = "client_error"
        /// Reading from or writing to the upstream failed.
        case upstreamError = "upstream_error"
        /// The gateway closed it (`SIGTERM` at the end of `shutdown_grace`).
        case shutdown
    }

    /// What the timer's firing means.
    public enum Timer: Equatable, Sendable {
        /// Bytes moved since it was set: run it again at this time.
        case reschedule(UInt64)
        /// The idle bound passed: close both sides.
        case expired
        /// The tunnel is over.
        case none
    }

    /// What a side's socket reported of its peer's stream (`open`, or `ended`: its FIN or an error came as an event).
    public typealias PeerStream = HTTP1ConnectionStateMachine.PeerStream

    /// The client's socket.
    public private(set) var clientPeer: PeerStream
    /// The upstream's socket.
    public private(set) var upstreamPeer: PeerStream
    /// Client → upstream.
    public private(set) var fromClient = Flow.open(paused: false)
    /// Upstream → client.
    public private(set) var fromUpstream = Flow.open(paused: false)
    /// Bytes read from the client (relayed to the upstream).
    public private(set) var bytesIn: Int64 = 0
    /// Bytes read from the upstream (relayed to the client).
    public private(set) var bytesOut: Int64 = 0
    /// When a byte last moved (monotonic nanoseconds).
    public private(set) var lastMoved: UInt64
    public let idleTimeout: UInt64
    public let highWater: Int
    public let lowWater: Int
    public private(set) var outcome: Outcome?

    /// `clientPeer`, `upstreamPeer`: what the connections heard before the tunnel opened (a FIN in the same burst as the
    /// `101`, say, brings no event again).
    public init(now: UInt64, idleTimeout: UInt64, highWater: Int = Backpressure.highWater,
         lowWater: Int = Backpressure.lowWater, clientPeer: PeerStream = .open, upstreamPeer: PeerStream = .open) {
        self.clientPeer = clientPeer
        self.upstreamPeer = upstreamPeer
        lastMoved = now
        self.idleTimeout = idleTimeout
        self.highWater = highWater
        self.lowWater = lowWater
    }

    public var isDone: Bool { outcome != nil }
    /// When the idle bound passes, unless a byte moves first.
    public var idleDeadline: UInt64 { lastMoved &+ idleTimeout }

    public func flow(from side: Side) -> Flow { side == .client ? fromClient : fromUpstream }

    private mutating func set(_ side: Side, _ flow: Flow) {
        if side == .client { fromClient = flow } else { fromUpstream = flow }
    }

    /// How many bytes the next read from `side` may take, given `buffered` bytes waiting for the other side; 0 when
    /// the direction is not open or has no room (it is then `paused` if it was open).
    public mutating func room(from side: Side, buffered: Int) -> Int {
        guard !isDone, case .open = flow(from: side) else { return 0 }
        let room = highWater - buffered
        if room <= 0 {
            set(side, .open(paused: true))
            return 0
        }
        return room
    }

    public func peer(_ side: Side) -> PeerStream { side == .client ? clientPeer : upstreamPeer }

    /// `side`'s socket reported the peer's FIN, a hang-up or an error.
    public mutating func hungUp(_ side: Side) {
        if side == .client { clientPeer = .ended } else { upstreamPeer = .ended }
    }

    /// A read from `side` returned `read` of the `asked` bytes: true when it emptied the socket, so reading again would
    /// only return `EAGAIN` (with edge-triggered readiness the next bytes bring an event of their own). Never over TLS
    /// (`tls`: a record may hold more than was asked for) nor once the peer hung up (its EOF comes with no event).
    public func readEmptied(from side: Side, read: Int, asked: Int, tls: Bool) -> Bool {
        read < asked && !tls && peer(side) == .open
    }

    /// `count` bytes were read from `side` at `now`.
    public mutating func moved(from side: Side, _ count: Int, now: UInt64) {
        guard count > 0 else { return }
        if side == .client { bytesIn += Int64(count) } else { bytesOut += Int64(count) }
        lastMoved = now
    }

    /// Bytes were written to a side at `now` (a write counts as movement too: a slow reader still reading is not idle).
    public mutating func wrote(now: UInt64) { lastMoved = now }

    /// `side` ended its stream.
    public mutating func ended(from side: Side) {
        guard !isDone, case .open = flow(from: side) else { return }
        set(side, .ending)
    }

    /// The buffer towards `side.other` holds `buffered` bytes after a write. Returns what to do for the direction
    /// from `side`: resume reading it (`true`) when it was paused and the buffer is down to `lowWater`.
    public mutating func drained(towards receiver: Side, buffered: Int) -> Bool {
        let sender = receiver.other
        guard !isDone, flow(from: sender) == .open(paused: true), buffered <= lowWater else { return false }
        set(sender, .open(paused: false))
        return true
    }

    /// The direction from `side` should shut its receiver's write half now: it is `ending` and nothing is left.
    public func shouldShut(from side: Side, buffered: Int) -> Bool {
        !isDone && flow(from: side) == .ending && buffered == 0
    }

    /// The receiver of `side`'s direction had its write half shut. True when both directions are shut: the caller
    /// ends the tunnel `closed` (`end`) and closes both sides.
    public mutating func shut(from side: Side) -> Bool {
        guard !isDone else { return false }
        set(side, .shut)
        return fromClient == .shut && fromUpstream == .shut
    }

    /// The tunnel ends with `outcome`; false when it had ended already (the caller does nothing then).
    public mutating func end(_ outcome: Outcome) -> Bool {
        guard !isDone else { return false }
        self.outcome = outcome
        return true
    }

    /// The idle timer fired at `now`.
    public mutating func timerFired(now: UInt64) -> Timer {
        guard !isDone else { return .none }
        if case .early(let at) = RequestDeadlines.expiry(of: idleDeadline, now: now) { return .reschedule(at) }
        outcome = .idleTimeout
        return .expired
    }
}

extension TunnelState {
    /// Every input of the tunnel as one value, for `handle(_:)` (the event × state table of `TunnelStateTests`; the
    /// relay calls the methods, each of which is one of these).
    public enum Event: Equatable, Sendable {
        /// The relay is about to read from `side`, `buffered` bytes waiting for the other side (`room`).
        case read(from: Side, buffered: Int)
        /// `count` bytes were read from `side` at `now` (`moved`).
        case moved(from: Side, count: Int, now: UInt64)
        /// `side`'s socket reported its peer's FIN, a hang-up or an error (`hungUp`).
        case hungUp(Side)
        /// `side` ended its stream (`ended`).
        case ended(from: Side)
        /// The buffer towards `receiver` holds `buffered` bytes after a write (`drained`).
        case drained(towards: Side, buffered: Int)
        /// The receiver of `side`'s direction had its write half shut (`shut`).
        case shut(from: Side)
        /// An error, shutdown or both directions shut end the tunnel (`end`).
        case end(Outcome)
        /// The idle timer fired at `now` (`timerFired`).
        case timer(now: UInt64)
    }

    /// What the relay does after an event.
    public enum Action: Equatable, Sendable {
        case none
        /// Read at most this many bytes from the side.
        case read(max: Int)
        /// The direction has no room: its sending side is not read until the receiver drains.
        case pause
        /// Read the paused side again.
        case resume
        /// Both directions are shut: end the tunnel `closed` and close both sides.
        case closeBoth
        /// The tunnel ended: close both sides, log the outcome.
        case finish(Outcome)
        /// Bytes moved since the timer was set: run it again at this time.
        case reschedule(UInt64)
    }

    /// One event in, one action out (the methods above, as a table).
    public mutating func handle(_ event: Event) -> Action {
        switch event {
        case .read(let side, let buffered):
            let wasOpen = flow(from: side) == .open(paused: false) && !isDone
            let n = room(from: side, buffered: buffered)
            if n > 0 { return .read(max: n) }
            return wasOpen && flow(from: side) == .open(paused: true) ? .pause : .none
        case .moved(let side, let count, let now):
            moved(from: side, count, now: now)
            return .none
        case .hungUp(let side):
            hungUp(side)
            return .none
        case .ended(let side):
            ended(from: side)
            return .none
        case .drained(let receiver, let buffered):
            return drained(towards: receiver, buffered: buffered) ? .resume : .none
        case .shut(let side):
            return shut(from: side) ? .closeBoth : .none
        case .end(let outcome):
            return end(outcome) ? .finish(outcome) : .none
        case .timer(let now):
            switch timerFired(now: now) {
            case .reschedule(let at): return .reschedule(at)
            case .expired: return .finish(.idleTimeout)
            case .none: return .none
            }
        }
    }
}
