import Glibc

/// Accepts from a level-triggered listening socket without spinning when descriptors run out.
///
/// When `accept4` fails with `EMFILE`/`ENFILE` the connection stays in the kernel's queue, the socket stays
/// readable, and a level-triggered loop would call the listener again at once, forever (~100% CPU per loop and
/// no progress). Like nginx, the gate then stops polling the listener and polls it again `pause` seconds later
/// (default 0.1 s); a connection closing in between frees a descriptor that the next poll uses. `onExhausted`
/// is called once per episode (from the first failure until an accept succeeds), for one log line.
///
/// Confined to the loop's thread. The listener owns the gate; the gate keeps its listener weakly.
public final class ListenerGate {
    public let fd: Int32
    private unowned let loop: EventLoop
    /// The handler registered for `fd`; set by the owner right after it is initialised.
    public weak var handler: EventHandler?
    private let pause: UInt64
    private let onExhausted: (Int32) -> Void
    private var timer: LoopTimer?
    /// Not polled now; the timer will register the listener again.
    public private(set) var isPaused = false
    private var inEpisode = false
    private var closed = false

    /// - Parameters:
    ///   - pause: seconds between two polls while descriptors are exhausted. Default 0.1.
    ///   - onExhausted: called with `errno` at the start of each exhaustion episode.
    public init(fd: Int32, loop: EventLoop, pause: Double = 0.1, onExhausted: @escaping (Int32) -> Void = { _ in }) {
        self.fd = fd
        self.loop = loop
        self.pause = .nanoseconds(pause)
        self.onExhausted = onExhausted
    }

    /// The next pending connection, or nil: none pending, closed, or descriptors exhausted (then the gate has
    /// stopped polling the listener and will resume by itself).
    public func accept() -> (fd: Int32, peer: SocketAddress)? {
        guard !closed, !isPaused else { return nil }
        switch Socket.tryAccept(fd) {
        case .connection(let c, let peer):
            inEpisode = false
            return (c, peer)
        case .none:
            return nil
        case .exhausted(let e):
            if !inEpisode {
                inEpisode = true
                onExhausted(e)
            }
            pauseAccepting()
            return nil
        }
    }

    private func pauseAccepting() {
        isPaused = true
        loop.deregister(fd)
        let t = timer ?? LoopTimer { [unowned self] in self.resume() }
        timer = t
        loop.schedule(t, at: loop.now &+ pause)
    }

    private func resume() {
        guard !closed, isPaused, let handler else { return }
        do {
            try loop.register(fd, handler, interest: EventLoop.readable)
            isPaused = false
        } catch {
            // epoll itself is short of memory: try again after another pause.
            if let timer { loop.schedule(timer, at: loop.now &+ pause) }
        }
    }

    /// Stops polling and closes the listening socket. Idempotent.
    public func close() {
        guard !closed else { return }
        closed = true
        if let timer { loop.cancel(timer) }
        if !isPaused { loop.deregister(fd) }
        Socket.close(fd)
    }
}
