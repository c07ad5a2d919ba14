import COpenSSL
import Glibc

/// The state of a non-blocking TLS handshake.
public enum TLSHandshakeResult: Equatable, Sendable {
    case done
    /// Call `handshake()` again when the socket is readable.
    case wantRead
    /// Call `handshake()` again when the socket is writable.
    case wantWrite
    /// The handshake failed; the connection must be closed (no `shutdown()` needed).
    case failed(String)
}

/// One TLS connection (`SSL*`) over a non-blocking socket, server or client side. Confined to one event
/// loop thread, like the socket it wraps; the caller owns and closes the file descriptor.
///
/// `read(into:max:)` and `write(from:)` have the contract of `Socket.read` / `Socket.write`, so a
/// connection can switch between plain and TLS transport:
///
/// - **Reads drain.** `read` calls `SSL_read_ex` until `max` bytes are delivered or OpenSSL needs more from
///   the socket. A result below `max` therefore means both the socket and OpenSSL's record buffer were
///   drained, exactly as for `Socket.read`. A result of exactly `max` may leave decrypted bytes inside
///   OpenSSL (`pendingBytes > 0`) that no epoll edge will ever announce: read again before waiting. The same
///   holds after pausing reads for backpressure — resuming must call `read` rather than wait for an edge.
/// - **Crossed wants.** TLS can need to write while reading (a TLS 1.3 key update, a handshake message)
///   and read while writing. `read` then reports `.wouldBlock` with `readWantsWrite == true`; `write`
///   reports `.wouldBlock` (or a partial `.processed`) with `writeWantsRead == true`. Rule for the caller:
///   on EPOLLOUT also retry a read when `readWantsWrite`; on EPOLLIN also retry the flush when
///   `writeWantsRead`. (Simplest correct form: on any event of a TLS connection, retry both a pending
///   read and a pending write.)
/// - **Writes** use partial-write mode with a moving buffer: after `.wouldBlock` or a partial write the
///   unwritten bytes must stay at the front of the same `IOBuffer` (appending more is fine) for the retry.
/// - **EOF.** A `close_notify` from the peer is `.eof`. A TCP close without `close_notify` is also `.eof`,
///   with `sawUncleanEOF == true`: HTTP framing (Content-Length, chunked, HTTP/2 frames) detects truncation;
///   a caller relying on close-delimited bodies must treat an unclean EOF as an error.
/// - **Errors** are `.error(errno)` for socket errors and `.error(EPROTO)` for TLS protocol errors, with the
///   text in `lastError`. After an error, close without `shutdown()`.
///
/// OpenSSL's socket BIO writes with `write(2)`: the process must ignore `SIGPIPE`
/// (`GatewayServer.blockSignals()` does).
public final class TLSStream {
    public let fd: Int32
    let ssl: OpaquePointer
    public let isServer: Bool
    /// Keeps the context (and the ALPN list its callback points into) alive for this connection's life.
    private let owner: AnyObject
    public private(set) var isHandshakeComplete = false
    /// The last read stopped because OpenSSL must write first: retry the read on EPOLLOUT.
    public private(set) var readWantsWrite = false
    /// The last write stopped because OpenSSL must read first: retry the write on EPOLLIN.
    public private(set) var writeWantsRead = false
    /// The peer closed the TCP connection without a TLS `close_notify`.
    public private(set) var sawUncleanEOF = false
    /// Text of the last failure (handshake, read or write).
    public private(set) var lastError: String?
    /// A fatal error happened: no more I/O and no `close_notify`.
    private var broken = false
    /// A result to report on the next `read` (an EOF or error met after bytes were already delivered).
    private var deferredReadResult: IOResult?

    init(ssl: OpaquePointer, fd: Int32, isServer: Bool, owner: AnyObject) {
        self.ssl = ssl
        self.fd = fd
        self.isServer = isServer
        self.owner = owner
    }

    deinit { SSL_free(ssl) }

    // MARK: handshake

    /// Advances the handshake; call again on the readiness it asks for.
    public func handshake() -> TLSHandshakeResult {
        if isHandshakeComplete { return .done }
        if broken { return .failed(lastError ?? "TLS connection failed") }
        TLSErrorQueue.clear()
        errno = 0
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            isHandshakeComplete = true
            return .done
        }
        let err = SSL_get_error(ssl, rc)
        switch err {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default:
            let message = failure(err, during: "handshake")
            return .failed(message)
        }
    }

    // MARK: I/O

    /// Decrypts up to `max` bytes into `buffer` (see the type's documentation for the draining rule).
    public func read(into buffer: IOBuffer, max: Int = 65536) -> IOResult {
        if let deferred = deferredReadResult {
            if case .eof = deferred {} else { deferredReadResult = nil }
            return deferred
        }
        if broken { return .error(EPROTO) }
        readWantsWrite = false
        buffer.reserve(max)
        let start = buffer.writable.baseAddress!
        var total = 0
        while total < max {
            TLSErrorQueue.clear()
            errno = 0
            var n = 0
            let rc = SSL_read_ex(ssl, start + total, max - total, &n)
            if rc == 1 {
                total += n
                continue
            }
            let err = SSL_get_error(ssl, rc)
            let outcome: IOResult
            switch err {
            case SSL_ERROR_WANT_READ:
                outcome = .wouldBlock
            case SSL_ERROR_WANT_WRITE:
                readWantsWrite = true
                outcome = .wouldBlock
            case SSL_ERROR_ZERO_RETURN:
                outcome = .eof
            case SSL_ERROR_SSL where ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING:
                TLSErrorQueue.clear()
                sawUncleanEOF = true
                broken = true  // no close_notify may be sent after this error
                outcome = .eof
            default:
                let e = errno
                _ = failure(err, during: "read")
                outcome = .error(err == SSL_ERROR_SYSCALL && e != 0 ? e : EPROTO)
            }
            if case .eof = outcome { deferredReadResult = .eof }  // sticky
            if total == 0 { return outcome }
            buffer.didWrite(total)
            if case .error = outcome { deferredReadResult = outcome }
            return .processed(total)
        }
        buffer.didWrite(total)
        return .processed(total)
    }

    /// Encrypts and sends as much of `buffer` as the socket takes, consuming what was sent.
    public func write(from buffer: IOBuffer) -> IOResult {
        if broken { return .error(EPROTO) }
        writeWantsRead = false
        var total = 0
        while !buffer.isEmpty {
            let r = buffer.readable
            TLSErrorQueue.clear()
            errno = 0
            var n = 0
            let rc = SSL_write_ex(ssl, r.baseAddress, r.count, &n)
            if rc == 1 {
                buffer.consume(n)
                total += n
                continue
            }
            let err = SSL_get_error(ssl, rc)
            switch err {
            case SSL_ERROR_WANT_WRITE:
                return total > 0 ? .processed(total) : .wouldBlock
            case SSL_ERROR_WANT_READ:
                writeWantsRead = true
                return total > 0 ? .processed(total) : .wouldBlock
            default:
                let e = errno
                _ = failure(err, during: "write")
                return .error(err == SSL_ERROR_SYSCALL && e != 0 ? e : EPROTO)
            }
        }
        return .processed(total)
    }

    /// Sends `close_notify` if the connection is healthy; never blocks and never waits for the peer's reply.
    public func shutdown() {
        guard isHandshakeComplete, !broken else { return }
        TLSErrorQueue.clear()
        _ = SSL_shutdown(ssl)
        TLSErrorQueue.clear()
        broken = true
    }

    // MARK: state

    /// The last `read` met the end of the peer's stream (`close_notify` or TCP EOF) after delivering bytes: the next
    /// `read` reports `.eof` at once. A short read does not mean "wait for an edge" then: a `close_notify` without
    /// a TCP FIN brings none.
    public var endOfStreamPending: Bool {
        if case .eof? = deferredReadResult { return true }
        return false
    }

    /// Decrypted bytes buffered inside OpenSSL (`SSL_pending`): readable now, without any new epoll edge.
    public var pendingBytes: Int { Int(SSL_pending(ssl)) }

    /// The protocol chosen by ALPN, `nil` when none was negotiated (treat as HTTP/1.1).
    public var negotiatedALPN: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// `TLSv1.2`, `TLSv1.3`, …
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// The negotiated cipher suite's OpenSSL name (`ECDHE-RSA-AES128-GCM-SHA256`, `TLS_AES_128_GCM_SHA256`).
    public var cipher: String {
        guard let c = SSL_get_current_cipher(ssl), let name = SSL_CIPHER_get_name(c) else { return "" }
        return String(cString: name)
    }

    /// True when the handshake resumed an earlier session.
    public var sessionReused: Bool { SSL_session_reused(ssl) == 1 }

    // MARK: failures

    /// Records a fatal failure (clearing the error queue) and returns its text.
    private func failure(_ err: Int32, during operation: String) -> String {
        let e = errno
        broken = true
        var detail = TLSErrorQueue.drain()
        if !isServer {
            let verify = SSL_get_verify_result(ssl)
            if verify != Int(X509_V_OK) {
                let reason = String(cString: X509_verify_cert_error_string(verify))
                detail = detail.isEmpty ? "certificate verify failed: \(reason)" : "\(detail) (\(reason))"
            }
        }
        if detail.isEmpty {
            if err == SSL_ERROR_SYSCALL {
                detail = e == 0 ? "connection closed by the peer"
                    : (String(validatingCString: strerror(e)) ?? "errno \(e)")
            } else if err == SSL_ERROR_ZERO_RETURN {
                detail = "the peer closed the TLS connection"
            } else {
                detail = "SSL error \(err)"
            }
        }
        let message = "TLS \(operation) failed: \(detail)"
        lastError = message
        return message
    }
}
