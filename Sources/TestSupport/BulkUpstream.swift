import EventLoop
import Foundation
import Glibc
import Synchronization

/// An upstream that answers every request with the same large body as fast as the sockets allow (a thread per
/// connection, blocking `send` of one precomputed buffer): for tests of response buffering, where the in-process
/// sample upstream (debug build) produces bytes too slowly to fill anything. Keep-alive; counts connections.
public final class BulkUpstream: @unchecked Sendable {
    public let port: UInt16
    private let listenFD: Int32
    private let response: [UInt8]
    private let state = Mutex<(connections: Int, stopped: Bool)>((0, false))

    public init(bodyBytes: Int) throws {
        guard let addr = SocketAddress(ip: "127.0.0.1", port: 0) else { throw HarnessError("address") }
        listenFD = try Socket.listen(addr, backlog: 256, reusePort: false)
        port = Socket.localAddress(listenFD)?.port ?? 0
        response = Array("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(bodyBytes)\r\n\r\n".utf8)
            + [UInt8](repeating: UInt8(ascii: "b"), count: bodyBytes)
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// `http://127.0.0.1:PORT`.
    public var url: String { "http://127.0.0.1:\(port)" }
    public var connections: Int { state.withLock { $0.connections } }
    public func stop() { state.withLock { $0.stopped = true } }
    deinit { Glibc.close(listenFD) }

    private var stopped: Bool { state.withLock { $0.stopped } }

    private func acceptLoop() {
        while !stopped {
            var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0, let (fd, _) = Socket.accept(listenFD) else { continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            var tv = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            state.withLock { $0.connections += 1 }
            Thread { [self] in serve(fd) }.start()
        }
    }

    /// Answers each request head; ends on EOF, an error, or `stop()` (a blocked send times out every second).
    private func serve(_ fd: Int32) {
        defer { Glibc.close(fd) }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while !stopped {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return }
            if n < 0 { if errno == EAGAIN || errno == EINTR { continue } else { return } }
            pending += chunk[0..<n]
            while let end = Self.headEnd(pending) {
                pending.removeFirst(end)
                var sent = 0
                while sent < response.count && !stopped {
                    let w = response[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if w > 0 { sent += w } else if w < 0 && (errno == EAGAIN || errno == EINTR) { continue } else { return }
                }
            }
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }
}
