import COpenSSL

/// A TLS setup or handshake failure, with OpenSSL's error queue rendered into `message`.
public struct TLSError: Error, CustomStringConvertible, Sendable, Equatable {
    public var message: String
    public var description: String { message }

    public init(_ message: String) { self.message = message }

    /// `context`, followed by whatever OpenSSL queued on this thread (the queue is cleared).
    static func openSSL(_ context: String) -> TLSError {
        let detail = TLSErrorQueue.drain()
        return TLSError(detail.isEmpty ? context : "\(context): \(detail)")
    }
}

/// TLS protocol floor for a listener (docs/configuration.md `server.tls.min_version`). Below 1.2 does not exist by design.
public enum TLSMinimumVersion: String, Sendable, CaseIterable {
    case tls12 = "1.2"
    case tls13 = "1.3"

    var openSSLValue: Int32 { self == .tls12 ? TLS1_2_VERSION : TLS1_3_VERSION }
}

/// OpenSSL's error queue is per thread: an entry left behind by one call makes the next `SSL_get_error`
/// on the same thread lie. Every TLS call here clears it before and drains it after a failure.
public enum TLSErrorQueue {
    /// Every queued error as one line (`; `-separated), leaving the queue empty.
    public static func drain() -> String {
        var parts: [String] = []
        var buf = [CChar](repeating: 0, count: 256)
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            ERR_error_string_n(code, &buf, buf.count)
            let text = String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if parts.count < 4 { parts.append(text) }
        }
        return parts.joined(separator: "; ")
    }

    /// Forgets anything queued on this thread.
    @inline(__always) public static func clear() { ERR_clear_error() }
}

/// ALPN protocol names in wire format (length-prefixed), with a trailing zero byte as end marker.
func alpnWireFormat(_ protocols: [String]) throws(TLSError) -> [UInt8] {
    var wire: [UInt8] = []
    for p in protocols {
        let bytes = Array(p.utf8)
        guard !bytes.isEmpty, bytes.count <= 255 else { throw TLSError("invalid ALPN protocol name \"\(p)\"") }
        wire.append(UInt8(bytes.count))
        wire.append(contentsOf: bytes)
    }
    return wire
}
