// Test helpers for the TLS tests: a PKI made with the `openssl` CLI, `openssl s_server` processes, and a small
// TLS echo/HTTP server on a real EventLoop, shared by the TLS and ats-check tests (@testable import TestSupport).
import EventLoop
import Foundation
import Glibc
import Synchronization

struct TLSTestError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Certificates and keys made once per test process in a temporary directory.
struct TLSFixtures: Sendable {
    let dir: String
    var caCert: String { dir + "/ca.pem" }
    var caKey: String { dir + "/ca.key" }
    /// A second, unrelated CA (for "untrusted issuer" tests).
    var otherCACert: String { dir + "/other-ca.pem" }
    /// RSA-2048, SHA-256, SAN DNS:localhost + IP:127.0.0.1, signed by `caCert`.
    var serverCert: String { dir + "/server.pem" }
    var serverKey: String { dir + "/server.key" }
    /// EC P-256 server certificate, SHA-256.
    var ecCert: String { dir + "/ec.pem" }
    var ecKey: String { dir + "/ec.key" }
    var sha1Cert: String { dir + "/sha1.pem" }
    var sha1Key: String { dir + "/sha1.key" }
    var rsa1024Cert: String { dir + "/rsa1024.pem" }
    var rsa1024Key: String { dir + "/rsa1024.key" }
    var ec224Cert: String { dir + "/ec224.pem" }
    var ec224Key: String { dir + "/ec224.key" }
    var expiredCert: String { dir + "/expired.pem" }
    var expiredKey: String { dir + "/expired.key" }
    var futureCert: String { dir + "/future.pem" }
    var futureKey: String { dir + "/future.key" }
    /// A key that matches none of the certificates.
    var strayKey: String { dir + "/stray.key" }
    var encryptedKey: String { dir + "/encrypted.key" }
    var notPEM: String { dir + "/not-pem.txt" }

    nonisolated(unsafe) private static var made: Result<TLSFixtures, TLSTestError>?
    private static let lock = Mutex<Void>(())

    /// The shared fixtures (made on first use; a failure to make them fails every test that needs them).
    static func shared() throws -> TLSFixtures {
        try lock.withLock { _ in
            if made == nil { made = Result { try TLSFixtures.make() }.mapError { TLSTestError("\($0)") } }
            return try made!.get()
        }
    }

    private static func make() throws -> TLSFixtures {
        let dir = NSTemporaryDirectory() + "tls-fixtures-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let f = TLSFixtures(dir: dir)
        func ossl(_ args: [String]) throws {
            let r = try Run.command("openssl", args, timeout: 60)
            guard r.status == 0 else { throw TLSTestError("openssl \(args.joined(separator: " ")) failed: \(r.stderr)") }
        }
        let ext = dir + "/server.ext"
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: ext, atomically: true, encoding: .utf8)
        try ossl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f.caKey, "-out", f.caCert,
                  "-days", "30", "-sha256", "-subj", "/CN=AppCheck Test CA"])
        try ossl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/other-ca.key", "-out", f.otherCACert,
                  "-days", "30", "-sha256", "-subj", "/CN=Unrelated CA"])
        var serial = 100
        func issue(_ name: String, newkey: [String], digest: String = "-sha256") throws {
            serial += 1
            let key = "\(dir)/\(name).key", csr = "\(dir)/\(name).csr", pem = "\(dir)/\(name).pem"
            try ossl(["req", "-newkey"] + newkey + ["-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost"])
            try ossl(["x509", "-req", "-in", csr, "-CA", f.caCert, "-CAkey", f.caKey, "-set_serial", String(serial),
                      "-out", pem, "-days", "30", digest, "-extfile", ext])
        }
        try issue("server", newkey: ["rsa:2048"])
        try issue("ec", newkey: ["ec", "-pkeyopt", "ec_paramgen_curve:P-256"])
        try issue("sha1", newkey: ["rsa:2048"], digest: "-sha1")
        try issue("rsa1024", newkey: ["rsa:1024"])
        try issue("ec224", newkey: ["ec", "-pkeyopt", "ec_paramgen_curve:P-224"])
        // Past and future validity windows: `openssl ca` takes explicit -startdate/-enddate.
        try FileManager.default.createDirectory(atPath: dir + "/newcerts", withIntermediateDirectories: true)
        try "".write(toFile: dir + "/index.txt", atomically: true, encoding: .utf8)
        try "1000\n".write(toFile: dir + "/serial", atomically: true, encoding: .utf8)
        try """
        [ ca ]
        default_ca = test_ca
        [ test_ca ]
        database = \(dir)/index.txt
        new_certs_dir = \(dir)/newcerts
        serial = \(dir)/serial
        default_md = sha256
        policy = any
        unique_subject = no
        copy_extensions = none
        x509_extensions = server_ext
        [ any ]
        commonName = supplied
        [ server_ext ]
        subjectAltName = DNS:localhost,IP:127.0.0.1
        basicConstraints = CA:FALSE
        extendedKeyUsage = serverAuth

        """.write(toFile: dir + "/ca.cnf", atomically: true, encoding: .utf8)
        for (name, start, end) in [("expired", "20200101000000Z", "20200301000000Z"),
                                   ("future", "20450101000000Z", "20460101000000Z")] {
            let key = "\(dir)/\(name).key", csr = "\(dir)/\(name).csr"
            try ossl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost"])
            try ossl(["ca", "-batch", "-notext", "-config", dir + "/ca.cnf", "-cert", f.caCert, "-keyfile", f.caKey,
                      "-in", csr, "-out", "\(dir)/\(name).pem", "-startdate", start, "-enddate", end])
        }
        try ossl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", f.strayKey])
        try ossl(["pkey", "-in", f.serverKey, "-aes256", "-passout", "pass:secret", "-out", f.encryptedKey])
        try "this is not a certificate\n".write(toFile: f.notPEM, atomically: true, encoding: .utf8)
        return f
    }
}

/// A port that was free a moment ago (bind port 0, read it, close).
func tlsTestFreePort() throws -> UInt16 {
    let fd = try Socket.listen(SocketAddress(ip: "127.0.0.1", port: 0)!, reusePort: false)
    defer { Socket.close(fd) }
    guard let port = Socket.localAddress(fd)?.port else { throw TLSTestError("getsockname failed") }
    return port
}

/// True once something accepts TCP connections on 127.0.0.1:`port`, polling until `deadline`.
func tlsTestWaitListening(_ port: UInt16, timeout: Double = 10, while alive: () -> Bool = { true }) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline && alive() {
        if let (fd, connected) = try? Socket.connect(SocketAddress(ip: "127.0.0.1", port: port)!) {
            var ok = connected
            if !connected {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                ok = poll(&p, 1, 1000) == 1 && Socket.pendingError(fd) == 0
            }
            Socket.close(fd)
            if ok { return true }
        }
        usleep(20_000)
    }
    return false
}

/// An `openssl s_server` on a free port, killed by `stop()`.
final class OpenSSLServer: @unchecked Sendable {
    let port: UInt16
    private let process: Process
    private let stdin: Pipe

    /// Starts `openssl s_server -accept PORT -cert … -key … <extra>` and waits until it accepts connections.
    init(cert: String, key: String, extra: [String]) throws {
        var lastError = "s_server did not start"
        for _ in 0..<5 {
            let port = try tlsTestFreePort()
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = ["openssl", "s_server", "-accept", String(port), "-cert", cert, "-key", key, "-quiet"] + extra
            let input = Pipe()  // kept open: s_server must not see EOF on stdin
            p.standardInput = input
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.runHoldingEnvironment()
            if tlsTestWaitListening(port, timeout: 10, while: { p.isRunning }) {
                self.port = port
                process = p
                stdin = input
                return
            }
            lastError = p.isRunning ? "s_server not listening on \(port) after 10s" : "s_server exited (\(p.terminationStatus))"
            if p.isRunning { p.terminate(); p.waitUntilExit() }
        }
        throw TLSTestError(lastError)
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? stdin.fileHandleForWriting.close()
    }

    deinit { stop() }
}

/// What the echo server observed, readable from the test thread.
struct TLSEchoStats: Sendable {
    var handshakes: [(alpn: String?, version: String, cipher: String)] = []
    var failures: [String] = []
    var maxPendingSeen = 0
    var bytesEchoed = 0
}

/// A TLS server on its own EventLoop thread: echoes every byte, or answers one HTTP/1.1 request when the
/// first bytes are `GET `. Follows the rules a gateway connection must follow: read until a short read,
/// stop reading above a bound of unsent output, and on any event retry both the flush and the read.
final class TLSEchoServer: @unchecked Sendable {
    let loop: EventLoop
    let port: UInt16
    let listenFD: Int32
    /// Swapped by tests (reload); new connections use the current one.
    let context: Mutex<TLSServerContext>
    let stats = Mutex(TLSEchoStats())
    fileprivate var connections: [Int32: TLSEchoConnection] = [:]  // loop thread only
    private var acceptor: TLSEchoAcceptor?
    /// Read size per call: small, so that reads end with decrypted bytes still inside OpenSSL.
    let readSize: Int

    /// The state of every connection, read on the loop thread (for a test's failure message).
    func debugState() -> String {
        let result = Mutex<String>("no answer from the loop")
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            let text = connections.values.map { c in
                "fd \(c.fd): in \(c.inBuf.readableCount) out \(c.outBuf.readableCount) pending \(c.stream.pendingBytes) "
                    + "readWantsWrite \(c.stream.readWantsWrite) writeWantsRead \(c.stream.writeWantsRead) "
                    + "eof \(c.peerEOF) hup \(c.peerHungUp) closed \(c.closed)"
            }.joined(separator: "; ")
            result.withLock { $0 = "connections: [\(text)] echoed \(stats.withLock { $0.bytesEchoed })" }
            done.signal()
        }
        _ = done.wait(timeout: .now() + 2)
        return result.withLock { $0 }
    }

    init(context: TLSServerContext, readSize: Int = 4096) throws {
        self.context = Mutex(context)
        self.readSize = readSize
        loop = try EventLoop()
        listenFD = try Socket.listen(SocketAddress(ip: "127.0.0.1", port: 0)!, reusePort: false)
        port = Socket.localAddress(listenFD)?.port ?? 0
        let a = TLSEchoAcceptor(server: self)
        acceptor = a
        try loop.register(listenFD, a, interest: EventLoop.readable)
        loop.startThread(name: "tls-echo")
    }

    func swapContext(_ new: TLSServerContext) { context.withLock { $0 = new } }

    func stop() {
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            for c in connections.values { c.close() }
            loop.deregister(listenFD)
            Socket.close(listenFD)
            acceptor = nil
            done.signal()
        }
        _ = done.wait(timeout: .now() + 5)
        loop.stop()
    }
}

private final class TLSEchoAcceptor: EventHandler {
    unowned let server: TLSEchoServer
    init(server: TLSEchoServer) { self.server = server }

    func handleEvent(_ events: UInt32) {
        while let (fd, _) = Socket.accept(server.listenFD) {
            let ctx = server.context.withLock { $0 }
            do {
                let stream = try ctx.makeStream(fd: fd)
                let c = TLSEchoConnection(fd: fd, stream: stream, server: server)
                server.connections[fd] = c
                try server.loop.register(fd, c)
                c.drive()
            } catch {
                server.stats.withLock { $0.failures.append("\(error)") }
                Socket.close(fd)
            }
        }
    }
}

private final class TLSEchoConnection: EventHandler {
    static let highWater = 256 * 1024
    let fd: Int32
    let stream: TLSStream
    unowned let server: TLSEchoServer
    let inBuf = IOBuffer(capacity: 16384)
    let outBuf = IOBuffer(capacity: 16384)
    var closed = false
    var peerEOF = false
    var peerHungUp = false
    var httpMode: Bool?
    var closeAfterFlush = false

    init(fd: Int32, stream: TLSStream, server: TLSEchoServer) {
        self.fd = fd
        self.stream = stream
        self.server = server
    }

    func handleEvent(_ events: UInt32) {
        if events & (EventLoop.readHangup | EventLoop.hangup | EventLoop.error) != 0 { peerHungUp = true }
        drive()
    }

    enum ReadStop { case drained, paused, ended }

    func drive() {
        if closed { return }
        if !stream.isHandshakeComplete {
            switch stream.handshake() {
            case .done:
                server.stats.withLock {
                    $0.handshakes.append((stream.negotiatedALPN, stream.protocolVersion, stream.cipher))
                }
            case .wantRead, .wantWrite:
                return
            case .failed(let message):
                server.stats.withLock { $0.failures.append(message) }
                close()
                return
            }
        }
        // Paused reading resumes only on progress: loop while paused and either flush wrote something. Only a
        // pass whose flushes both hit EAGAIN may wait for EPOLLOUT (a flush that empties the buffer leaves no edge
        // to come, and the bytes already decrypted inside OpenSSL would never be read).
        while !closed {
            let wrote = flush()
            if closed { return }
            let stop = readAvailable()
            if closed { return }
            let wroteAgain = flush()
            if closed { return }
            if stop == .paused && (wrote || wroteAgain) { continue }
            break
        }
        if !closed && outBuf.isEmpty && (peerEOF || closeAfterFlush) {
            stream.shutdown()
            close()
        }
    }

    /// Writes what is queued; true when something was written.
    func flush() -> Bool {
        guard !outBuf.isEmpty else { return false }
        switch stream.write(from: outBuf) {
        case .processed(let n): return n > 0
        case .wouldBlock, .eof: return false
        case .error:
            server.stats.withLock { $0.failures.append(stream.lastError ?? "write error") }
            close()
            return false
        }
    }

    func readAvailable() -> ReadStop {
        let max = server.readSize
        while !peerEOF && !closeAfterFlush {
            if outBuf.readableCount >= Self.highWater { return .paused }
            switch stream.read(into: inBuf, max: max) {
            case .processed(let n):
                let pending = stream.pendingBytes
                if pending > 0 { server.stats.withLock { $0.maxPendingSeen = Swift.max($0.maxPendingSeen, pending) } }
                process()
                if n < max && !peerHungUp { return .drained }
            case .wouldBlock:
                return .drained
            case .eof:
                peerEOF = true
                return .ended
            case .error:
                server.stats.withLock { $0.failures.append(stream.lastError ?? "read error") }
                close()
                return .ended
            }
        }
        return .ended
    }

    func process() {
        if httpMode == nil && inBuf.readableCount >= 4 {
            httpMode = Array(inBuf.readable.prefix(4)) == Array("GET ".utf8)
        }
        if httpMode == true {
            let text = String(decoding: inBuf.readable, as: UTF8.self)
            guard text.contains("\r\n\r\n") else { return }
            inBuf.clear()
            let body = "hello over \(stream.protocolVersion) alpn=\(stream.negotiatedALPN ?? "none")\n"
            outBuf.append("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
            closeAfterFlush = true
            return
        }
        if httpMode == false || inBuf.readableCount >= 4 {
            let n = inBuf.readableCount
            outBuf.append(inBuf.readable)
            inBuf.consume(n)
            server.stats.withLock { $0.bytesEchoed += n }
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        server.loop.deregister(fd)
        Socket.close(fd)
        server.connections[fd] = nil
    }
}

/// Connects a non-blocking TCP socket to 127.0.0.1:`port` and waits for the connection.
func tlsTestConnect(port: UInt16, timeout: Double = 5) throws -> Int32 {
    let (fd, connected) = try Socket.connect(SocketAddress(ip: "127.0.0.1", port: port)!)
    if !connected {
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&p, 1, Int32(timeout * 1000)) == 1, Socket.pendingError(fd) == 0 else {
            Socket.close(fd)
            throw TLSTestError("connect to \(port) failed")
        }
    }
    return fd
}

/// Drives a client handshake on a non-blocking socket with `poll`, bounded by `timeout`.
func tlsTestHandshake(_ stream: TLSStream, timeout: Double = 10) -> TLSHandshakeResult {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        let r = stream.handshake()
        var p = pollfd(fd: stream.fd, events: 0, revents: 0)
        switch r {
        case .done, .failed: return r
        case .wantRead: p.events = Int16(POLLIN)
        case .wantWrite: p.events = Int16(POLLOUT)
        }
        _ = poll(&p, 1, 200)
    }
    return .failed("handshake timed out")
}
