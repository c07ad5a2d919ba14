import EventLoop
import Foundation
import Glibc
import Synchronization

/// A loopback listener for hand-written test servers: an accept loop on a thread of its own hands each connection
/// (a blocking socket) to `serve` on a new thread, and closes it when `serve` returns. `stop()` ends the accept
/// loop within 100 ms; `serve` should check `isStopped` in its own loops.
public final class ThreadPerConnectionServer: @unchecked Sendable {
    public let port: UInt16
    private let listenFD: Int32
    private let serve: @Sendable (Int32) -> Void
    private let state = Mutex<(connections: Int, stopped: Bool)>((0, false))

    public init(backlog: Int32 = 256, serve: @escaping @Sendable (Int32) -> Void) throws {
        guard let addr = SocketAddress(ip: "127.0.0.1", port: 0) else { throw HarnessError("address") }
        listenFD = try Socket.listen(addr, backlog: backlog, reusePort: false)
        port = Socket.localAddress(listenFD)?.port ?? 0
        self.serve = serve
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { Glibc.close(listenFD) }

    /// `http://127.0.0.1:PORT`.
    public var url: String { "http://127.0.0.1:\(port)" }
    /// Connections accepted so far.
    public var connections: Int { state.withLock { $0.connections } }
    public var isStopped: Bool { state.withLock { $0.stopped } }
    public func stop() { state.withLock { $0.stopped = true } }

    private func acceptLoop() {
        while !isStopped {
            var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0, let (fd, _) = Socket.accept(listenFD) else { continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            state.withLock { $0.connections += 1 }
            let serve = self.serve
            Thread {
                serve(fd)
                Glibc.close(fd)
            }.start()
        }
    }

    /// The offset just past the first blank line (`CRLF CRLF`) of `bytes`: the end of a request head.
    public static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }
}
