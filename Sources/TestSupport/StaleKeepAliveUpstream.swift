import EventLoop
import Foundation
import Glibc
import Synchronization

/// An upstream that makes every pooled connection stale: on each connection it answers the first request
/// (`200`, `Content-Length: 2`, `ok`, keep-alive) and, when a second request arrives on the same connection, closes
/// it without a byte of response — what a server does when its keep-alive timeout races the proxy's next request.
/// A proxy must then retry a safe request once on a new connection (docs/behaviour.md). Counts request heads.
public final class StaleKeepAliveUpstream: @unchecked Sendable {
    public let port: UInt16
    private let listenFD: Int32
    private let state = Mutex<(heads: Int, connections: Int, stopped: Bool)>((0, 0, false))

    public init() throws {
        guard let addr = SocketAddress(ip: "127.0.0.1", port: 0) else { throw HarnessError("address") }
        listenFD = try Socket.listen(addr, backlog: 64, reusePort: false)
        port = Socket.localAddress(listenFD)?.port ?? 0
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Request heads received so far, over all connections.
    public var requestHeads: Int { state.withLock { $0.heads } }
    /// Connections accepted so far.
    public var connections: Int { state.withLock { $0.connections } }

    public func stop() {
        state.withLock { $0.stopped = true }
    }

    deinit { Glibc.close(listenFD) }

    private func acceptLoop() {
        while !state.withLock({ $0.stopped }) {
            var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0, let (fd, _) = Socket.accept(listenFD) else { continue }
            state.withLock { $0.connections += 1 }
            let conn = Thread { [self] in serve(fd) }
            conn.start()
        }
    }

    private func serve(_ fd: Int32) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var answered = 0
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline && !state.withLock({ $0.stopped }) {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            buffer += chunk[0..<n]
            while let end = Self.headEnd(buffer) {
                buffer.removeFirst(end)
                state.withLock { $0.heads += 1 }
                if answered == 1 {
                    Glibc.close(fd)
                    return
                }
                answered += 1
                let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
                _ = response.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
        Glibc.close(fd)
    }

    /// The length of the first complete request head (bodies are not expected), or nil.
    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i + 4
        }
        return nil
    }
}
