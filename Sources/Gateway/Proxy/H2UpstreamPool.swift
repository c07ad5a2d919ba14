import ProxyCore
import EventLoop

/// The HTTP/2 connections of one event loop to one `h2` upstream (SPEC §6.1): every exchange gets a stream on the
/// oldest connection that takes one more (under the server's `SETTINGS_MAX_CONCURRENT_STREAMS`, not draining after a
/// GOAWAY), and a new connection is opened only when none does — within the pool's connect budget
/// (`max_connects_per_second`, the per-address share) like HTTP/1.1 connections.
final class H2UpstreamPool {
    /// The pool owns this object.
    private unowned let pool: UpstreamPool
    /// `https://`: ALPN offers `h2` alone; the handshake must select it.
    let tls: TLSClientContext?
    private(set) var connections: [H2UpstreamConnection] = []
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` as last heard on any connection: what a new connection assumes
    /// until its own SETTINGS arrive (so a burst is spread over connections by the server's real limit).
    var knownMaxConcurrent = H2UpstreamConnectionState.initialMaxConcurrent

    init(pool: UpstreamPool, tls: TLSClientContext?) {
        self.pool = pool
        self.tls = tls
    }

    /// A stream for one exchange.
    func acquire(for owner: UpstreamOwner, method: String, heavy: Bool) -> Result<UpstreamChannel, UpstreamFailure> {
        connection(heavy: heavy).map { $0.openStream(for: owner, method: method) }
    }

    /// The oldest connection that takes one more stream, else a new one.
    func connection(heavy: Bool) -> Result<H2UpstreamConnection, UpstreamFailure> {
        for c in connections where c.acceptsStream { return .success(c) }
        let socket: UpstreamPool.NewSocket
        switch pool.newSocket(heavy: heavy, tls: tls) {
        case .failure(let kind): return .failure(kind)
        case .success(let s): socket = s
        }
        let conn = H2UpstreamConnection(fd: socket.fd, pool: pool, connected: socket.connected, tls: socket.tls,
                                        assumedMaxConcurrent: knownMaxConcurrent)
        do { try pool.context.loop.register(socket.fd, conn) } catch {
            Socket.close(socket.fd)
            return .failure(.connectRefused)
        }
        connections.append(conn)
        conn.start()
        return .success(conn)
    }

    /// A connection closed.
    func closed(_ conn: H2UpstreamConnection) {
        connections.removeAll { $0 === conn }
    }

    /// No new streams on the current connections; each closes when its last stream ends.
    func retire() {
        for c in connections { c.retire() }
    }
}
