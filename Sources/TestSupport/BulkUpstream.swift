import EventLoop
import Foundation
import Glibc
import Synchronization

/// An upstream that answers every request with the same large body as fast as the sockets allow: for tests of
/// response buffering, where the in-process sample upstream (debug build) produces bytes too slowly to fill anything.
/// Keep-alive; counts connections.
///
/// One epoll loop serves every connection (non-blocking sends of one precomputed buffer), as a production upstream
/// would. It was a thread per connection: a burst test that opens 2,000 upstream connections then held 2,000 threads
/// blocked in `send` inside the test process, beside every other test.
public final class BulkUpstream: @unchecked Sendable {
    public let port: UInt16
    private let response: [UInt8]
    private let loop: EventLoop
    private let listenFD: Int32
    private let accepted = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    /// The open connections; touched on the loop's thread only.
    private var open: [Int32: Connection] = [:]

    public init(bodyBytes: Int) throws {
        response = Array("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: \(bodyBytes)\r\n\r\n".utf8)
            + [UInt8](repeating: UInt8(ascii: "b"), count: bodyBytes)
        guard let address = SocketAddress(ip: "127.0.0.1", port: 0) else { throw HarnessError("address") }
        listenFD = try Socket.listen(address, backlog: 4096, reusePort: false)
        port = Socket.localAddress(listenFD)?.port ?? 0
        do {
            loop = try EventLoop()
            try loop.register(listenFD, Acceptor(self), interest: EventLoop.readable)
        } catch {
            Glibc.close(listenFD)
            throw error
        }
        loop.startThread(name: "bulk-upstream")
    }

    /// `http://127.0.0.1:PORT`.
    public var url: String { "http://127.0.0.1:\(port)" }
    /// Connections accepted so far.
    public var connections: Int { accepted.load(ordering: .relaxed) }

    /// Closes the listener and every connection, and ends the loop's thread, soon after (on the loop's thread).
    /// Idempotent. Until it is called the loop holds this object (its handlers do).
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        loop.execute { [self] in
            loop.deregister(listenFD)
            Glibc.close(listenFD)
            for fd in open.keys {
                loop.deregister(fd)
                Glibc.close(fd)
            }
            open.removeAll()
            loop.stop()
        }
    }

    private func acceptAll() {
        while case .connection(let fd, _) = Socket.tryAccept(listenFD) {
            accepted.add(1, ordering: .relaxed)
            let connection = Connection(fd: fd, upstream: self)
            do {
                try loop.register(fd, connection)
                open[fd] = connection
            } catch {
                Glibc.close(fd)
            }
        }
    }

    fileprivate func close(_ connection: Connection) {
        guard open.removeValue(forKey: connection.fd) != nil else { return }
        loop.deregister(connection.fd)
        Glibc.close(connection.fd)
    }

    private final class Acceptor: EventHandler {
        let upstream: BulkUpstream
        init(_ upstream: BulkUpstream) { self.upstream = upstream }
        func handleEvent(_ events: UInt32) { upstream.acceptAll() }
    }

    /// One keep-alive connection: reads request heads, owes one response per head, sends them in turn.
    fileprivate final class Connection: EventHandler {
        let fd: Int32
        let upstream: BulkUpstream
        private var pending: [UInt8] = []
        private var owed = 0
        private var sent = 0
        /// The peer has shut its side: answer what it asked, then close.
        private var peerDone = false

        init(fd: Int32, upstream: BulkUpstream) {
            self.fd = fd
            self.upstream = upstream
        }

        // Edge-triggered: read until the socket is drained, write until it is full.
        func handleEvent(_ events: UInt32) {
            if !peerDone && events & (EventLoop.readable | EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 {
                guard readAll() else { return upstream.close(self) }
            }
            guard writeAll() else { return upstream.close(self) }
            if peerDone && owed == 0 { upstream.close(self) }
        }

        /// False on an error; EOF sets `peerDone`.
        private func readAll() -> Bool {
            var chunk = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n == 0 {
                    peerDone = true
                    return true
                }
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno == EAGAIN || errno == EWOULDBLOCK
                }
                pending += chunk[0..<n]
                while let end = ThreadPerConnectionServer.headEnd(pending) {
                    pending.removeFirst(end)
                    owed += 1
                }
            }
        }

        /// False on an error.
        private func writeAll() -> Bool {
            let response = upstream.response
            while owed > 0 {
                let n = response[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno == EAGAIN || errno == EWOULDBLOCK
                }
                sent += n
                if sent == response.count {
                    sent = 0
                    owed -= 1
                }
            }
            return true
        }
    }
}
