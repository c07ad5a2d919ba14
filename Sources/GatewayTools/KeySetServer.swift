import EventLoop
import Foundation
import HTTPWire
import Synchronization

/// A small HTTP/1.1 server on its own event loop that publishes a JWKS document in place of Firebase: for the
/// demo command and the tests.
///
/// Every `GET` (any path; `/jwks` by convention) is answered `200` with the current document
/// (`application/json`, `Content-Length`, the `Cache-Control` value when one is set) and the connection is
/// closed. While `setAvailable(false)`, every request gets `503`. `stop()` stops listening altogether.
public final class KeySetServer: @unchecked Sendable {
    let loop: EventLoop
    /// The bound address (with the real port when 0 was asked for).
    public let address: SocketAddress
    private let listenFD: Int32
    private let document = Mutex<[UInt8]>([])
    private let cacheControl = Mutex<String?>(nil)
    private let available = Atomic<Bool>(true)
    private let requests = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    /// Open connections; touched on the loop thread only.
    fileprivate var connections: [Int32: KeySetServerConnection] = [:]

    /// Binds `host:port` (port 0 = any free port) and serves `document` on a new thread.
    public init(document: String = "{\"keys\":[]}", host: String = "127.0.0.1", port: UInt16 = 0) throws {
        loop = try EventLoop(index: 98)
        guard let addr = SocketAddress(ip: host, port: port) else { throw SocketError("address \(host)", errno: 0) }
        let fd = try Socket.listen(addr, backlog: 128, reusePort: false)
        listenFD = fd
        address = Socket.localAddress(fd) ?? addr
        self.document.withLock { $0 = Array(document.utf8) }
        try loop.register(fd, KeySetServerAcceptor(fd: fd, server: self), interest: EventLoop.readable)
        loop.startThread(name: "jwks-server") { [self] in
            self.closeAll()
            self.exited.signal()
        }
    }

    /// The port it listens on.
    public var port: UInt16 { address.port }

    /// `http://127.0.0.1:PORT/jwks`.
    public var url: String { "http://\(address)/jwks" }

    /// Requests received so far (including those answered 503).
    public var fetchCount: Int { requests.load(ordering: .relaxed) }

    /// Replaces the document served from the next request on.
    public func setDocument(_ text: String) { document.withLock { $0 = Array(text.utf8) } }

    /// The `Cache-Control` value sent with 200 responses; `nil` = no header.
    public func setCacheControl(_ value: String?) { cacheControl.withLock { $0 = value } }

    /// `false`: answer every request `503` (the server keeps listening).
    public func setAvailable(_ value: Bool) { available.store(value, ordering: .relaxed) }

    /// Stops listening and closes every connection; returns when the server thread has ended.
    public func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        loop.stop()
        exited.wait()
    }

    /// The full response to one request.
    fileprivate func response() -> [UInt8] {
        requests.add(1, ordering: .relaxed)
        guard available.load(ordering: .relaxed) else {
            let body = "{\"error\":\"unavailable\"}\n"
            return Array("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        }
        let body = document.withLock { $0 }
        var head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n"
        if let value = cacheControl.withLock({ $0 }) { head += "Cache-Control: \(value)\r\n" }
        head += "Connection: close\r\n\r\n"
        return Array(head.utf8) + body
    }

    fileprivate func closeAll() {
        for (fd, _) in connections { loop.deregister(fd); Socket.close(fd) }
        connections.removeAll()
        loop.deregister(listenFD)
        Socket.close(listenFD)
    }
}

private final class KeySetServerAcceptor: EventHandler {
    let fd: Int32
    unowned let server: KeySetServer
    init(fd: Int32, server: KeySetServer) { self.fd = fd; self.server = server }

    func handleEvent(_ events: UInt32) {
        while let (c, _) = Socket.accept(fd) {
            let conn = KeySetServerConnection(fd: c, server: server)
            do { try server.loop.register(c, conn) } catch { Socket.close(c); continue }
            server.connections[c] = conn
            conn.handleEvent(EventLoop.readable)
        }
    }
}

fileprivate final class KeySetServerConnection: EventHandler {
    let fd: Int32
    unowned let server: KeySetServer
    let inBuf = IOBuffer(capacity: 4096)
    let outBuf = IOBuffer(capacity: 4096)
    var parser = HTTPRequestHeadParser()
    var answered = false
    var closed = false

    init(fd: Int32, server: KeySetServer) {
        self.fd = fd
        self.server = server
    }

    func handleEvent(_ events: UInt32) {
        if closed { return }
        if !answered && events & (EventLoop.readable | EventLoop.hangup | EventLoop.readHangup | EventLoop.error) != 0 {
            reading: while !closed && !answered {
                switch Socket.read(fd, into: inBuf, max: 16384) {
                case .processed: process()
                case .wouldBlock: break reading
                case .eof, .error: close()
                }
            }
        }
        flush()
    }

    private func process() {
        switch parser.parse(inBuf.readable) {
        case .needMore:
            return
        case .failure(let error):
            outBuf.append("HTTP/1.1 \(error.status) Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            answered = true
        case .complete:
            outBuf.append(server.response())
            answered = true
        }
    }

    private func flush() {
        guard !closed, answered else { return }
        switch Socket.write(fd, from: outBuf) {
        case .processed, .wouldBlock:
            if outBuf.isEmpty { close() }
        case .eof, .error:
            close()
        }
    }

    private func close() {
        guard !closed else { return }
        closed = true
        server.loop.deregister(fd)
        server.connections[fd] = nil
        Socket.close(fd)
    }
}
