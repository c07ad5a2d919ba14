import EventLoop
import Foundation
import Glibc
import Synchronization

/// An upstream that makes every pooled connection stale: on each connection it answers the first request
/// (`200`, `Content-Length: 2`, `ok`, keep-alive) and, when a second request arrives on the same connection, closes
/// it without a byte of response — what a server does when its keep-alive timeout races the proxy's next request.
/// A proxy must then retry a safe request once on a new connection (docs/behaviour.md). Counts request heads.
public final class StaleKeepAliveUpstream: @unchecked Sendable {
    private var server: ThreadPerConnectionServer!
    private let heads = Mutex<Int>(0)

    public init() throws {
        server = try ThreadPerConnectionServer(backlog: 64) { [unowned self] fd in self.serve(fd) }
    }

    public var port: UInt16 { server.port }
    /// Request heads received so far, over all connections.
    public var requestHeads: Int { heads.withLock { $0 } }
    /// Connections accepted so far.
    public var connections: Int { server.connections }

    public func stop() { server.stop() }

    private func serve(_ fd: Int32) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var answered = 0
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline && !server.isStopped {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return }
            buffer += chunk[0..<n]
            while let end = ThreadPerConnectionServer.headEnd(buffer) {
                buffer.removeFirst(end)
                heads.withLock { $0 += 1 }
                // The second request on a connection: close without a byte of response.
                if answered == 1 { return }
                answered += 1
                let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
                _ = response.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }
}
