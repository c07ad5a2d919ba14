import Foundation
import Glibc

/// An upstream that answers every request with the same large body as fast as the sockets allow (a thread per
/// connection, blocking `send` of one precomputed buffer): for tests of response buffering, where the in-process
/// sample upstream (debug build) produces bytes too slowly to fill anything. Keep-alive; counts connections.
public final class BulkUpstream: @unchecked Sendable {
    private let response: [UInt8]
    private var server: ThreadPerConnectionServer!

    public init(bodyBytes: Int) throws {
        response = Array("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(bodyBytes)\r\n\r\n".utf8)
            + [UInt8](repeating: UInt8(ascii: "b"), count: bodyBytes)
        server = try ThreadPerConnectionServer { [unowned self] fd in self.serve(fd) }
    }

    public var port: UInt16 { server.port }
    /// `http://127.0.0.1:PORT`.
    public var url: String { server.url }
    public var connections: Int { server.connections }
    public func stop() { server.stop() }

    /// Answers each request head; ends on EOF, an error, or `stop()` (a blocked send times out every second).
    private func serve(_ fd: Int32) {
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while !server.isStopped {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return }
            if n < 0 { if errno == EAGAIN || errno == EINTR { continue } else { return } }
            pending += chunk[0..<n]
            while let end = ThreadPerConnectionServer.headEnd(pending) {
                pending.removeFirst(end)
                var sent = 0
                while sent < response.count && !server.isStopped {
                    let w = response[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if w > 0 { sent += w } else if w < 0 && (errno == EAGAIN || errno == EINTR) { continue } else { return }
                }
            }
        }
    }
}
