import Gateway
import EventLoop
import Glibc
import JSONLog

/// A listening socket of one loop (level-triggered, so a burst of connections is taken in fair slices). Out
/// of descriptors, it pauses accepting (`ListenerGate`) rather than spin, and logs once per episode.
final class Listener: EventHandler {
    let fd: Int32
    /// The worker owns this object and outlives it (`Unretained`: no reference-count traffic per access).
    private let workerRef: Unretained<Worker>
    var worker: Worker { workerRef.value }
    /// A TLS listener: connections start with a handshake (the worker's current TLS context).
    let secure: Bool
    private let gate: ListenerGate

    init(fd: Int32, worker: Worker, secure: Bool) {
        self.fd = fd
        let workerRef = Unretained(worker)
        self.workerRef = workerRef
        self.secure = secure
        let log = worker.logSink
        let loopIndex = worker.loop.index
        gate = ListenerGate(fd: fd, loop: worker.loop) { error in
            log.warning("accept paused: out of file descriptors; retrying every 100 ms", [
                ("error", .string(String(cString: strerror(error)))), ("loop", .int(loopIndex)),
                ("open_connections", .int(workerRef.value.connectionCount)),
            ])
        }
        gate.handler = self
    }

    func handleEvent(_ events: UInt32) {
        var n = 0
        while n < 64, let (c, peer) = gate.accept() {
            n += 1
            worker.accepted(fd: c, peer: peer, secure: secure)
        }
    }

    func close() { gate.close() }
}
