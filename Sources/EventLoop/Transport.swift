/// How a connection's bytes travel: straight over the socket, or through TLS on it. One place for the choice every
/// connection (HTTP/1.1, HTTP/2) makes on each read and write.
public enum Transport {
    case plain
    case tls(TLSStream)

    /// Whether bytes go through TLS (`https` for `X-Forwarded-Proto`).
    public var isTLS: Bool {
        if case .tls = self { return true }
        return false
    }

    /// Reads at most `max` bytes from `fd` (through TLS when set) into `buffer`.
    @inline(__always)
    public func read(_ fd: Int32, into buffer: IOBuffer, max: Int) -> IOResult {
        switch self {
        case .plain: return Socket.read(fd, into: buffer, max: max)
        case .tls(let stream): return stream.read(into: buffer, max: max)
        }
    }

    /// A read already met the end of the peer's stream and the next one returns `.eof` (TLS only: OpenSSL saw
    /// `close_notify` or EOF behind the bytes it returned). Read again instead of waiting for an epoll edge.
    @inline(__always)
    public var endOfStreamPending: Bool {
        if case .tls(let stream) = self { return stream.endOfStreamPending }
        return false
    }

    /// Writes what `buffer` holds to `fd` (through TLS when set), consuming what was written.
    @inline(__always)
    public func write(_ fd: Int32, from buffer: IOBuffer) -> IOResult {
        switch self {
        case .plain: return Socket.write(fd, from: buffer)
        case .tls(let stream): return stream.write(from: buffer)
        }
    }
}
