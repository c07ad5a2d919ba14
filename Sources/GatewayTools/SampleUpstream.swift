import EventLoop
import Foundation
import HTTPWire
import JSONLog
import Synchronization

/// A small HTTP/1.1 origin server on its own event loop: the demo's upstream and the tests' real upstream.
///
/// - `/echo` (any method): streams the request body back (chunked), byte for byte.
/// - `/status/NNN`: answers NNN with a short body.
/// - `/bytes/N`: N bytes of a repeating pattern with `Content-Length`.
/// - `/chunked/N`: N bytes sent chunked in 8 KiB pieces.
/// - `/delay/MS`: answers after MS milliseconds.
/// - `/hang`: reads the request and never answers.
/// - `/drop`: closes the connection without answering.
/// - `/close-delimited/N`: N bytes, no length, ends by closing.
/// - `/hop-by-hop`: 200 with hop-by-hop fields (`Keep-Alive`, `Connection: x-private`, `X-Private`, `Upgrade`) and
///   an `X-Request-Id` of its own, none of which a proxy may pass on.
/// - anything else: 200 with a JSON echo of method, path and headers (`X-Upstream: sample`).
public final class SampleUpstream: @unchecked Sendable {
    public let loop: EventLoop
    public private(set) var address: SocketAddress
    private var listenFD: Int32 = -1
    private let counter = Atomic<Int>(0)
    fileprivate let accepted = Atomic<Int>(0)
    private let received = Mutex<[String]>([])
    private let exited = DispatchGroup()

    /// Set for an HTTPS sample upstream (tests of `https://` upstreams).
    let tls: TLSServerContext?

    /// Binds `host:port` (port 0 = any free port) and serves on a new thread; with `tls`, over TLS.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, tls: TLSServerContext? = nil) throws {
        self.tls = tls
        loop = try EventLoop(index: 99)
        guard let addr = SocketAddress(ip: host, port: port) else { throw SocketError("address \(host)", errno: 0) }
        let fd = try Socket.listen(addr, backlog: 1024, reusePort: false)
        listenFD = fd
        address = Socket.localAddress(fd) ?? addr
        let acceptor = SampleAcceptor(fd: fd, upstream: self)
        try loop.register(fd, acceptor, interest: EventLoop.readable)
        exited.enter()
        loop.startThread(name: "sample-upstream") { [exited] in exited.leave() }
    }

    /// Requests whose head was received.
    public var requestCount: Int { counter.load(ordering: .relaxed) }
    /// Connections accepted so far.
    public var connectionCount: Int { accepted.load(ordering: .relaxed) }

    /// The request heads received, as text, oldest first (for tests asserting forwarded headers).
    public var receivedHeads: [String] { received.withLock { $0 } }

    func record(_ head: HTTPRequestHead) {
        counter.add(1, ordering: .relaxed)
        var text = "\(head.method) \(head.target) HTTP/1.\(head.versionMinor)\n"
        for i in 0..<head.headers.count { text += "\(head.headers.name(at: i)): \(head.headers.value(at: i))\n" }
        received.withLock { $0.append(text); if $0.count > 1000 { $0.removeFirst() } }
    }

    public func stop() {
        loop.stop()
        exited.wait()
    }
}

private final class SampleAcceptor: EventHandler {
    let fd: Int32
    unowned let upstream: SampleUpstream
    init(fd: Int32, upstream: SampleUpstream) { self.fd = fd; self.upstream = upstream }

    func handleEvent(_ events: UInt32) {
        while let (c, _) = Socket.accept(fd) {
            upstream.accepted.add(1, ordering: .relaxed)
            var stream: TLSStream?
            if let tls = upstream.tls {
                guard let s = try? tls.makeStream(fd: c) else { Socket.close(c); continue }
                stream = s
            }
            let conn = SampleConnection(fd: c, upstream: upstream, tls: stream)
            do { try upstream.loop.register(c, conn) } catch { Socket.close(c); continue }
            conn.handleEvent(EventLoop.readable)
        }
    }
}

private final class SampleConnection: EventHandler {
    enum Body { case none, length(Int64), chunked(ChunkedDecoder) }
    let fd: Int32
    unowned let upstream: SampleUpstream
    let inBuf = IOBuffer(capacity: 4096)
    let outBuf = IOBuffer(capacity: 4096)
    var parser = HTTPRequestHeadParser(limits: HTTPParserLimits(maxHeadBytes: 64 * 1024, maxHeaders: 200))
    var head: HTTPRequestHead?
    var body = Body.none
    var echo = false
    var closed = false
    var closeAfter = false
    var hanging = false
    var generating = false
    var timer: LoopTimer?

    let tls: TLSStream?
    var handshaken: Bool

    init(fd: Int32, upstream: SampleUpstream, tls: TLSStream?) {
        self.fd = fd
        self.upstream = upstream
        self.tls = tls
        handshaken = tls == nil
    }

    func handleEvent(_ events: UInt32) {
        if closed { return }
        if let tls, !handshaken {
            switch tls.handshake() {
            case .done: handshaken = true
            case .wantRead, .wantWrite: return
            case .failed: close(); return
            }
        }
        if tls != nil || events & (EventLoop.readable | EventLoop.hangup | EventLoop.readHangup | EventLoop.error) != 0 {
            reading: while !closed {
                switch (tls.map { $0.read(into: inBuf, max: 65536) } ?? Socket.read(fd, into: inBuf, max: 65536)) {
                case .processed: process()
                case .wouldBlock: break reading
                case .eof, .error: close()
                }
            }
        }
        flush()
    }

    private func process() {
        while !closed {
            if head == nil {
                if inBuf.isEmpty || hanging { return }
                switch parser.parse(inBuf.readable) {
                case .needMore: return
                case .failure(let e):
                    outBuf.append("HTTP/1.1 \(e.status) Bad\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    closeAfter = true
                    return
                case .complete(let h, let consumed):
                    inBuf.consume(consumed)
                    parser.reset()
                    head = h
                    upstream.record(h)
                    switch h.framing {
                    case .none: body = .none
                    case .contentLength(let n): body = .length(n)
                    case .chunked: body = .chunked(ChunkedDecoder(maxBodyBytes: .max))
                    }
                    if !h.keepAlive { closeAfter = true }
                    startResponse(h)
                    if closed { return }
                }
            }
            guard let h = head else { return }
            switch body {
            case .none:
                finishRequest(h)
            case .length(let remaining):
                let n = Int(min(Int64(inBuf.readableCount), remaining))
                if echo && n > 0 { writeChunk(UnsafeRawBufferPointer(rebasing: inBuf.readable[0..<n])) }
                inBuf.consume(n)
                if remaining - Int64(n) == 0 { finishRequest(h) } else { body = .length(remaining - Int64(n)); return }
            case .chunked(var decoder):
                if inBuf.isEmpty { return }
                let result = decoder.decode(inBuf.readable) { data in if self.echo { self.writeChunk(data) } }
                switch result {
                case .consumed(let n): inBuf.consume(n); body = .chunked(decoder); return
                case .done(let n): inBuf.consume(n); finishRequest(h)
                case .failure: close(); return
                }
            }
        }
    }

    private func writeChunk(_ data: UnsafeRawBufferPointer) {
        guard data.count > 0 else { return }
        outBuf.appendHex(data.count)
        outBuf.append("\r\n")
        outBuf.append(data)
        outBuf.append("\r\n")
        if outBuf.readableCount > 256 * 1024 { flush() }
    }

    private func startResponse(_ h: HTTPRequestHead) {
        let path = h.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? h.target
        echo = false
        if path == "/echo" || path.hasSuffix("/echo") {
            echo = true
            outBuf.append("HTTP/1.1 200 OK\r\nX-Upstream: sample\r\nContent-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        }
    }

    private func finishRequest(_ h: HTTPRequestHead) {
        head = nil
        // While the answer is being generated a flush must not close the connection under it.
        generating = true
        defer { generating = false }
        let path = h.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? h.target
        let parts = path.split(separator: "/").map(String.init)
        if echo {
            outBuf.append("0\r\n\r\n")
        } else if parts.count >= 2, parts[parts.count - 2] == "status", let code = Int(parts[parts.count - 1]) {
            respond(code, body: Array("status \(code)\n".utf8), head: h)
        } else if parts.count >= 2, parts[parts.count - 2] == "bytes", let n = Int(parts[parts.count - 1]) {
            respond(200, body: Self.pattern(n), head: h)
        } else if parts.count >= 2, parts[parts.count - 2] == "chunked", let n = Int(parts[parts.count - 1]) {
            outBuf.append("HTTP/1.1 200 OK\r\nX-Upstream: sample\r\nTransfer-Encoding: chunked\r\n\r\n")
            let data = Self.pattern(n)
            var i = 0
            while i < n {
                let end = min(n, i + 8192)
                data[i..<end].withUnsafeBytes { writeChunk($0) }
                i = end
            }
            outBuf.append("0\r\n\r\n")
        } else if parts.count >= 2, parts[parts.count - 2] == "close-delimited", let n = Int(parts[parts.count - 1]) {
            outBuf.append("HTTP/1.1 200 OK\r\nX-Upstream: sample\r\nConnection: close\r\n\r\n")
            outBuf.append(Self.pattern(n))
            closeAfter = true
        } else if parts.count >= 2, parts[parts.count - 2] == "delay", let ms = Int(parts[parts.count - 1]) {
            hanging = true
            let t = LoopTimer { [weak self] in
                guard let self, !self.closed else { return }
                self.hanging = false
                self.respond(200, body: Array("delayed \(ms)\n".utf8), head: h)
                self.flush()
                self.process()
            }
            timer = t
            upstream.loop.schedule(t, at: upstream.loop.now + .nanoseconds(Double(ms) / 1000))
        } else if parts.last == "hop-by-hop" {
            let body = Array("hop\n".utf8)
            outBuf.append("HTTP/1.1 200 OK\r\nX-Upstream: sample\r\nKeep-Alive: timeout=5\r\nConnection: x-private\r\nX-Private: secret\r\nUpgrade: h2c\r\nX-Request-Id: upstream-own-id\r\nContent-Length: \(body.count)\r\n\r\n")
            if h.method != "HEAD" { outBuf.append(body) }
        } else if parts.last == "hang" {
            hanging = true
        } else if parts.last == "drop" {
            close()
        } else {
            var json = "{\"method\":\"\(h.method)\",\"target\":\(Self.quote(h.target)),\"headers\":{"
            for i in 0..<h.headers.count {
                if i > 0 { json += "," }
                json += "\(Self.quote(h.headers.lowercasedName(at: i))):\(Self.quote(h.headers.value(at: i)))"
            }
            json += "}}\n"
            respond(200, body: Array(json.utf8), head: h, type: "application/json")
        }
    }

    private func respond(_ status: Int, body: [UInt8], head h: HTTPRequestHead, type: String = "text/plain") {
        outBuf.append("HTTP/1.1 \(status) \(status == 200 ? "OK" : "Status")\r\nX-Upstream: sample\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\n")
        if closeAfter { outBuf.append("Connection: close\r\n") }
        outBuf.append("\r\n")
        if h.method != "HEAD" { outBuf.append(body) }
    }

    static func pattern(_ n: Int) -> [UInt8] { (0..<max(0, n)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 13) } }

    static func quote(_ s: String) -> String {
        var line = JSONLine()
        line.field("k", s)
        let text = String(decoding: line.bytes, as: UTF8.self)
        return String(text.dropFirst(4))
    }

    private func flush() {
        guard !closed else { return }
        switch (tls.map { $0.write(from: outBuf) } ?? Socket.write(fd, from: outBuf)) {
        case .processed, .wouldBlock:
            if outBuf.isEmpty && closeAfter && head == nil && !hanging && !generating { close() }
        case .eof, .error: close()
        }
    }

    private func close() {
        guard !closed else { return }
        closed = true
        if let t = timer { upstream.loop.cancel(t) }
        upstream.loop.deregister(fd)
        Socket.close(fd)
    }
}
