import COpenSSL
import CSystemShims
import EventLoop
import Foundation
import Glibc
import HTTPWire

/// One `GET` over a blocking socket, for the key-set fetch thread (never call it on an event-loop thread:
/// it resolves names with `getaddrinfo` and blocks on the socket).
///
/// - `http://` and `https://` (TLS 1.2 or later; the peer's chain is verified against `caFile`, or the system
///   store when `caFile` is `nil`, and its name against the URL's host with `SSL_set1_host`, or its IP
///   address for an IP literal; SNI is sent for names), and `file://` (the path after the scheme).
/// - `timeout` bounds the whole exchange (resolution excepted): connect, TLS handshake, request and response.
/// - The response body is limited to `maxBodyBytes` (default 1 MiB, `JWKSet.maxDocumentBytes`), whatever its
///   framing: `Content-Length`, chunked (RFC 9112 §7.1) or close-delimited (RFC 9112 §6.3 item 8).
/// - Any final status other than 200 is `FetchError.status`; 1xx interim responses are skipped.
struct BlockingHTTPClient: Sendable {
    /// Seconds for the whole exchange. Default 10.
    var timeout: Double = 10
    /// Largest body accepted, in bytes. Default 1 MiB.
    var maxBodyBytes: Int = 1 << 20
    /// PEM file of trusted CAs for `https://`; `nil` = the system store (`SSL_CTX_set_default_verify_paths`).
    var caFile: String? = nil

    init(timeout: Double = 10, maxBodyBytes: Int = 1 << 20, caFile: String? = nil) {
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
        self.caFile = caFile
    }

    /// Fetches `url`. Throws `FetchError` only.
    func get(_ url: String) throws -> FetchedResponse {
        let parsed = try FetchURL(url)
        if parsed.scheme == "file" { return try readFile(parsed.target) }
        return try send(parsed, head: "GET \(parsed.target) HTTP/1.1\r\nHost: \(parsed.hostHeader)\r\n"
            + "User-Agent: appcheck-gateway\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
            body: [], method: "GET", anyStatus: false)
    }

    /// `POST`s `body` to an `http://` or `https://` URL and returns the final response whatever its status.
    /// `headers` must not contain CR or LF (the caller builds them). Throws `FetchError` only.
    func post(_ url: String, headers: [(String, String)], body: [UInt8]) throws -> FetchedResponse {
        let parsed = try FetchURL(url)
        guard parsed.scheme != "file" else { throw FetchError.unsupportedScheme("file") }
        var head = "POST \(parsed.target) HTTP/1.1\r\nHost: \(parsed.hostHeader)\r\nUser-Agent: appcheck-gateway\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        return try send(parsed, head: head, body: body, method: "POST", anyStatus: true)
    }

    private func send(_ parsed: FetchURL, head: String, body: [UInt8], method: String, anyStatus: Bool) throws -> FetchedResponse {
        let deadline = Deadline(seconds: timeout)
        let addresses: [SocketAddress]
        do {
            addresses = try SocketAddress.resolve(host: parsed.host, port: parsed.port)
        } catch {
            throw FetchError.resolve("\(error)")
        }
        guard !addresses.isEmpty else { throw FetchError.resolve("resolve \(parsed.host): no address") }
        let fd = try connect(addresses, deadline: deadline)
        let stream = BlockingStream(fd: fd, deadline: deadline)
        defer { stream.close() }
        if parsed.scheme == "https" { try stream.startTLS(host: parsed.host, caFile: caFile) }
        try stream.write(Array(head.utf8) + body)
        return try readResponse(stream, method: method, anyStatus: anyStatus)
    }

    private func readFile(_ path: String) throws -> FetchedResponse {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FetchError.file("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(fd) }
        var body: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw FetchError.file("cannot read \(path): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            body.append(contentsOf: chunk[0..<n])
            if body.count > maxBodyBytes { throw FetchError.bodyTooLarge(maxBodyBytes) }
        }
        return FetchedResponse(status: 200, headers: ResponseHeaders(), body: body)
    }

    /// Connects to the first address that accepts, each attempt bounded by what is left of the deadline.
    private func connect(_ addresses: [SocketAddress], deadline: Deadline) throws -> Int32 {
        var lastError = FetchError.connect("no address")
        for address in addresses {
            let remaining = deadline.remaining
            guard remaining > 0 else { throw FetchError.timeout("connect to \(address)") }
            let fd: Int32
            let connected: Bool
            do {
                (fd, connected) = try Socket.connect(address)
            } catch let error as SocketError {
                lastError = error.errno == ECONNREFUSED ? .connectionRefused("\(address)") : .connect("\(error)")
                continue
            }
            if !connected {
                var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                var rc: Int32
                repeat {
                    rc = poll(&pfd, 1, Int32(min(ceil(deadline.remaining * 1000), 3_600_000)).clamped(0))
                } while rc < 0 && errno == EINTR
                if rc == 0 { Socket.close(fd); throw FetchError.timeout("connect to \(address)") }
                let err = rc < 0 ? errno : Socket.pendingError(fd)
                if err != 0 {
                    Socket.close(fd)
                    lastError = err == ECONNREFUSED ? .connectionRefused("\(address)") : .connect("\(SocketError("connect \(address)", errno: err))")
                    continue
                }
            }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
            return fd
        }
        throw lastError
    }

    private func readResponse(_ stream: BlockingStream, method: String, anyStatus: Bool) throws -> FetchedResponse {
        var pending: [UInt8] = []
        var parser = HTTPResponseHeadParser()
        var eof = false
        var head: HTTPResponseHead
        headLoop: while true {
            if !pending.isEmpty {
                switch pending.withUnsafeBytes({ parser.parse($0) }) {
                case .needMore:
                    break
                case .failure(let error):
                    throw FetchError.malformedResponse("bad response head (\(error.reason))")
                case .complete(let h, let consumed):
                    pending.removeFirst(consumed)
                    if h.isInformational { continue headLoop }
                    head = h
                    break headLoop
                }
            }
            if eof { throw FetchError.malformedResponse("connection closed before the response head was complete") }
            eof = try stream.read(appendingTo: &pending) == 0
        }
        guard head.status == 200 || anyStatus else { throw FetchError.status(head.status) }
        var fields: [(name: String, value: String)] = []
        for i in 0..<head.headers.count { fields.append((head.headers.name(at: i), head.headers.value(at: i))) }
        let headers = ResponseHeaders(fields: fields)

        var body: [UInt8] = []
        switch head.framing(requestMethod: method) {
        case .none:
            break
        case .contentLength(let length):
            guard length <= Int64(maxBodyBytes) else { throw FetchError.bodyTooLarge(maxBodyBytes) }
            let n = Int(length)
            while pending.count < n && !eof {
                eof = try stream.read(appendingTo: &pending) == 0
            }
            guard pending.count >= n else {
                throw FetchError.malformedResponse("connection closed after \(pending.count) of \(n) body bytes")
            }
            body = Array(pending[0..<n])
        case .chunked:
            var decoder = ChunkedDecoder(maxBodyBytes: Int64(maxBodyBytes))
            while true {
                let result = pending.withUnsafeBytes { input in
                    decoder.decode(input) { body.append(contentsOf: $0) }
                }
                pending.removeAll(keepingCapacity: true)
                switch result {
                case .done: return FetchedResponse(status: head.status, headers: headers, body: body)
                case .failure(.bodyTooLarge): throw FetchError.bodyTooLarge(maxBodyBytes)
                case .failure(let error): throw FetchError.malformedResponse("bad chunked body (\(error.reason))")
                case .consumed: break
                }
                if eof { throw FetchError.malformedResponse("connection closed inside the chunked body") }
                eof = try stream.read(appendingTo: &pending) == 0
            }
        case .untilClose:
            while !eof {
                if pending.count > maxBodyBytes { throw FetchError.bodyTooLarge(maxBodyBytes) }
                eof = try stream.read(appendingTo: &pending) == 0
            }
            if pending.count > maxBodyBytes { throw FetchError.bodyTooLarge(maxBodyBytes) }
            body = pending
        }
        return FetchedResponse(status: head.status, headers: headers, body: body)
    }
}

/// A monotonic deadline.
struct Deadline: Sendable {
    let end: UInt64

    init(seconds: Double) {
        end = CSystemShims_monotonic_ns() &+ UInt64(max(0, seconds) * 1_000_000_000)
    }

    /// Seconds left (0 when passed).
    var remaining: Double {
        let now = CSystemShims_monotonic_ns()
        return now >= end ? 0 : Double(end - now) / 1_000_000_000
    }
}

extension Int32 {
    fileprivate func clamped(_ low: Int32) -> Int32 { Swift.max(self, low) }
}

/// A connected blocking socket, optionally wrapped in TLS. Every read and write is bounded by the deadline
/// (re-armed as `SO_RCVTIMEO`/`SO_SNDTIMEO` before each call).
private final class BlockingStream {
    let fd: Int32
    let deadline: Deadline
    /// Kept alive as long as `ssl`, which points into it.
    private var context: TLSClientContext?
    private var ssl: OpaquePointer?

    init(fd: Int32, deadline: Deadline) {
        self.fd = fd
        self.deadline = deadline
    }

    func close() {
        if let ssl { SSL_free(ssl) }
        ssl = nil
        context = nil
        Socket.close(fd)
    }

    /// Arms the socket timeouts with what is left; throws `.timeout(phase)` when nothing is.
    private func arm(_ phase: String) throws {
        let remaining = deadline.remaining
        guard remaining > 0 else { throw FetchError.timeout(phase) }
        let whole = remaining.rounded(.down)
        var tv = timeval(tv_sec: Int(whole), tv_usec: Int((remaining - whole) * 1_000_000))
        if tv.tv_sec == 0 && tv.tv_usec == 0 { tv.tv_usec = 1 }
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    func startTLS(host: String, caFile: String?) throws {
        let ssl: OpaquePointer
        do {
            let context = try TLSClientContext(caFile: caFile)
            self.context = context
            // Names get SNI and a host-name check; IP literals an iPAddress check and no SNI (RFC 6066 §3).
            ssl = try context.makeSSL(serverName: host)
        } catch {
            throw FetchError.tls(error.message)
        }
        self.ssl = ssl
        guard SSL_set_fd(ssl, fd) == 1 else { throw FetchError.tls("SSL_set_fd: \(Self.openSSLErrors())") }
        while true {
            try arm("tls handshake")
            let rc = SSL_connect(ssl)
            if rc == 1 { return }
            let verify = SSL_get_verify_result(ssl)
            if verify != Int(X509_V_OK) {
                throw FetchError.tlsVerify(String(cString: X509_verify_cert_error_string(verify)))
            }
            let err = SSL_get_error(ssl, rc)
            if err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE { continue }
            if err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK) {
                throw FetchError.timeout("tls handshake")
            }
            let detail = Self.openSSLErrors()
            throw FetchError.tls(detail.isEmpty ? "handshake failed (connection closed by peer)" : detail)
        }
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            try arm("write")
            let n: Int = bytes.withUnsafeBytes { raw in
                let p = raw.baseAddress! + offset
                if let ssl { return Int(SSL_write(ssl, p, Int32(bytes.count - offset))) }
                return Glibc.send(fd, p, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { offset += n; continue }
            if let ssl {
                let err = SSL_get_error(ssl, Int32(n))
                if err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE { continue }
                throw FetchError.io("TLS write: \(Self.openSSLErrors())")
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw FetchError.timeout("write") }
            throw FetchError.io("\(SocketError("send", errno: errno))")
        }
    }

    /// Reads what is available into `buffer`; returns the count, 0 at the end of the stream.
    func read(appendingTo buffer: inout [UInt8]) throws -> Int {
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            try arm("read")
            let n: Int = chunk.withUnsafeMutableBytes { raw in
                if let ssl { return Int(SSL_read(ssl, raw.baseAddress, Int32(raw.count))) }
                return Glibc.recv(fd, raw.baseAddress, raw.count, 0)
            }
            if n > 0 { buffer.append(contentsOf: chunk[0..<n]); return n }
            if let ssl {
                let err = SSL_get_error(ssl, Int32(n))
                if err == SSL_ERROR_ZERO_RETURN { return 0 }
                if err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE { continue }
                if err == SSL_ERROR_SYSCALL && (errno == EAGAIN || errno == EWOULDBLOCK) { throw FetchError.timeout("read") }
                let detail = Self.openSSLErrors()
                // OpenSSL 3 reports a close without close_notify as an error; a truncated JWKS fails to parse
                // anyway, and Content-Length or chunked framing detect truncation themselves.
                if detail.contains("unexpected eof") { return 0 }
                throw FetchError.io("TLS read: \(detail.isEmpty ? "connection closed" : detail)")
            }
            if n == 0 { return 0 }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw FetchError.timeout("read") }
            throw FetchError.io("\(SocketError("recv", errno: errno))")
        }
    }

    /// OpenSSL's queued errors as `reason; reason`, and clears the queue.
    static func openSSLErrors() -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            parts.append(String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.joined(separator: "; ")
    }
}

/// One `POST` over a blocking socket with a total deadline, for the issuer's calls to Apple's DeviceCheck API
/// (docs/issuer.md). Blocks the calling thread: run it on a worker thread, never an event loop. `https://` is
/// verified against the system CA store and the URL's host, as for key sets.
public struct BlockingPost: Sendable {
    /// A call that got no complete HTTP answer (the text says why: resolve, connect, TLS, timeout, I/O).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    private let client: BlockingHTTPClient

    /// - Parameters:
    ///   - timeout: seconds for the whole call (connect, TLS, request, response).
    ///   - maxBodyBytes: largest response body read.
    public init(timeout: Double, maxBodyBytes: Int = 64 * 1024, caFile: String? = nil) {
        client = BlockingHTTPClient(timeout: timeout, maxBodyBytes: maxBodyBytes, caFile: caFile)
    }

    /// The final status and body, whatever the status.
    public func post(_ url: String, headers: [(String, String)], body: [UInt8]) throws(Failure) -> (status: Int, body: [UInt8]) {
        do {
            let response = try client.post(url, headers: headers, body: body)
            return (response.status, response.body)
        } catch let error as FetchError {
            throw Failure(description: error.description)
        } catch {
            throw Failure(description: "\(error)")
        }
    }
}
