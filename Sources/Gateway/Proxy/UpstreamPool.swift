import EventLoop
import Glibc

/// The keep-alive connections of one event loop to one upstream. Idle connections are reused newest first
/// (LIFO keeps the working set warm); at most `max_idle_connections` stay idle.
final class UpstreamPool {
    let settings: UpstreamSettings
    let addresses: [SocketAddress]
    /// For `https://` upstreams: verifies the chain (system store or `ca_file`) and the host name, sends SNI.
    let tls: TLSClientContext?
    /// The worker owns this object and outlives it (unowned(unsafe): no reference-count traffic per access).
    unowned(unsafe) let worker: Worker
    private var idle: [UpstreamConnection] = []
    private var nextAddress = 0
    /// Set when a reload replaced this pool: connections finish their exchange and close.
    private(set) var retired = false

    init(settings: UpstreamSettings, addresses: [SocketAddress], tls: TLSClientContext?, worker: Worker) {
        self.settings = settings
        self.addresses = addresses
        self.tls = tls
        self.worker = worker
    }

    var idleCount: Int { idle.count }

    /// A connection for one exchange: an idle one if any, else a new non-blocking connect.
    func acquire(for client: UpstreamOwner, method: String) -> Result<UpstreamConnection, UpstreamFailure> {
        while let conn = idle.popLast() {
            if conn.isUsable {
                conn.attach(client, method: method, reused: true)
                return .success(conn)
            }
            conn.close()
        }
        guard !addresses.isEmpty else { return .failure(.connectRefused) }
        let address = addresses[nextAddress % addresses.count]
        nextAddress &+= 1
        let connected: (fd: Int32, connected: Bool)
        do { connected = try Socket.connect(address) } catch { return .failure(.connectRefused) }
        Socket.setNoDelay(connected.fd)
        var stream: TLSStream?
        if let tls {
            do { stream = try tls.makeStream(fd: connected.fd, serverName: settings.host) } catch {
                Socket.close(connected.fd)
                return .failure(.tlsFailed)
            }
        }
        let conn = UpstreamConnection(fd: connected.fd, pool: self, connected: connected.connected, tls: stream)
        do { try worker.loop.register(connected.fd, conn) } catch {
            Socket.close(connected.fd)
            return .failure(.connectRefused)
        }
        conn.attach(client, method: method, reused: false)
        return .success(conn)
    }

    /// Takes back a connection whose exchange finished cleanly.
    func release(_ conn: UpstreamConnection) {
        if retired || idle.count >= settings.maxIdleConnections {
            conn.close()
            return
        }
        conn.becomeIdle(until: worker.loop.now + worker.runtime.idleTimeoutNS)
        idle.append(conn)
    }

    /// An idle connection closed or timed out.
    func remove(_ conn: UpstreamConnection) {
        if let i = idle.firstIndex(where: { $0 === conn }) { idle.remove(at: i) }
    }

    /// Closes idle connections and makes busy ones close when done (config reload, shutdown).
    func retire() {
        retired = true
        let all = idle
        idle.removeAll()
        for c in all { c.close() }
    }
}
