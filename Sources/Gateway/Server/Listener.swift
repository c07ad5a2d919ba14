import EventLoop
import Glibc

/// A listening socket of one loop (level-triggered, so a burst of connections is taken in fair slices).
final class Listener: EventHandler {
    let fd: Int32
    /// The worker owns this object and outlives it (unowned(unsafe): no reference-count traffic per access).
    unowned(unsafe) let worker: Worker
    /// A TLS listener: connections start with a handshake (the worker's current TLS context).
    let secure: Bool
    private var closed = false

    init(fd: Int32, worker: Worker, secure: Bool) {
        self.fd = fd
        self.worker = worker
        self.secure = secure
    }

    func handleEvent(_ events: UInt32) {
        var n = 0
        while !closed && n < 64, let (c, peer) = Socket.accept(fd) {
            n += 1
            worker.accepted(fd: c, peer: peer, secure: secure)
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        worker.loop.deregister(fd)
        Socket.close(fd)
    }
}
