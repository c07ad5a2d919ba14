import ProxyCore
import EventLoop
import GatewayConfig
import Glibc

/// The keep-alive connections of one event loop to one upstream. Idle connections are reused newest first
/// (LIFO keeps the working set warm); at most `max_idle_connections` stay idle.
final class UpstreamPool {
    let settings: UpstreamSettings
    let addresses: [SocketAddress]
    /// For `https://` upstreams: verifies the chain (system store or `ca_file`) and the host name, sends SNI.
    let tls: TLSClientContext?
    /// The loop's context outlives this object (`Unretained`: no reference-count traffic per access).
    private let contextRef: Unretained<LoopEnvironment>
    var context: LoopEnvironment { @inline(__always) get { contextRef.value } }
    private var state: UpstreamPoolState<UpstreamConnection>
    /// Requests in progress at this upstream per client address, on this loop (`max_upstream_requests_per_address`).
    /// Addresses at 0 are removed, so it holds at most one entry per request in progress.
    private var perAddress = AddressCounts()
    /// The last address whose requests here went from several at a time down to one, and until when (monotonic ns,
    /// 1 s later) it still counts as `heavy` with a single request: an address that churns connections of many
    /// streams each (issue 39) has all of them cancelled at once, and the first stream of its next connection would
    /// otherwise connect from the half of the budget kept for other addresses, once per connection. One slot: it
    /// follows the busiest churn, at no cost per request beyond one comparison; an address that only ever has one
    /// request in progress is never put in it.
    private var recentlyHeavy: ConnectionAddressKey?
    private var recentlyHeavyUntil: UInt64 = 0
    /// Set when a reload replaced this pool: connections finish their exchange and close.
    var retired: Bool { state.retired }
    /// `protocol: h2`: the multiplexed HTTP/2 connections (WebSocket handshakes still use HTTP/1.1 connections).
    private(set) var h2: H2UpstreamPool?

    /// `h2TLS`: for an `h2` upstream on `https://`, the client context offering ALPN `h2` alone.
    init(settings: UpstreamSettings, addresses: [SocketAddress], tls: TLSClientContext?, h2TLS: TLSClientContext? = nil,
         context: LoopEnvironment) {
        self.settings = settings
        self.addresses = addresses
        self.tls = tls
        self.contextRef = Unretained(context)
        state = UpstreamPoolState(maxIdle: settings.maxIdleConnections, addressCount: addresses.count,
                                  maxConnectsPerSecond: settings.maxConnectsPerSecond, now: context.loop.now)
        if settings.httpProtocol == .h2 { h2 = H2UpstreamPool(pool: self, tls: h2TLS) }
    }

    var idleCount: Int { state.idle.count }

    /// Counts one more request of `key` at this upstream and returns how many it now holds; nil, counting nothing,
    /// when the address already holds `limit` (0 = no bound) and `exempt()` (a trusted proxy) is false.
    func admit(_ key: ConnectionAddressKey, limit: Int, exempt: () -> Bool) -> Int? {
        perAddress.increment(key, limit: limit, exempt: exempt)
    }

    /// A request `admit` counted is over.
    func leave(_ key: ConnectionAddressKey) {
        if perAddress.decrement(key) == 2 {
            recentlyHeavy = key
            recentlyHeavyUntil = context.loop.now &+ 1_000_000_000
        }
    }

    /// Requests of `key` in progress at this upstream on this loop.
    func held(_ key: ConnectionAddressKey) -> Int { perAddress.count(key) }

    /// Admission of one request under `max_upstream_requests_per_address` (`limit`, 0 = off): counts it under its
    /// client's address once (`slot` keeps the key until the exchange leaves); nil when that address already holds
    /// `limit` (a trusted proxy is exempt), else whether the request is heavy (see `isHeavy`; never for a trusted proxy).
    func admitRequest(_ slot: inout ConnectionAddressKey?, of responder: ExchangeResponder?, limit: Int) -> Bool? {
        guard limit > 0 else { return false }
        let held: Int
        if slot == nil, let responder {
            let key = responder.peerKey
            guard let count = admit(key, limit: limit, exempt: { responder.peerTrusted }) else { return nil }
            slot = key
            held = count
        } else if let key = slot {
            held = perAddress.count(key)
        } else {
            return false
        }
        // Another request of the same address already in progress here (this one is counted too), or just before
        // (the streams of its previous connection, all cancelled at once).
        return isHeavy(slot!, held: held) && !(responder?.peerTrusted ?? false)
    }

    /// True when `key` (counted by `admit`, `held` requests here now) has another request in progress here, or had
    /// several at a time until less than a second ago (see `recentlyHeavy`): it may connect only from the first half
    /// of the connect budget.
    private func isHeavy(_ key: ConnectionAddressKey, held: Int) -> Bool {
        held > 1 || (key == recentlyHeavy && context.loop.now < recentlyHeavyUntil)
    }

    /// A connection for one exchange: an idle one if any, else a new non-blocking connect. `heavy`: see
    /// `UpstreamPoolState.acquire`. `upgrade`: a WebSocket handshake, always on a new connection (never the
    /// keep-alive pool; still within `max_connects_per_second`).
    func acquire(for client: UpstreamOwner, method: String, heavy: Bool = false,
                 upgrade: Bool = false) -> Result<UpstreamChannel, UpstreamFailure> {
        if let h2, !upgrade { return h2.acquire(for: client, method: method, heavy: heavy) }
        let address: SocketAddress
        switch upgrade ? state.newConnection(now: context.loop.now, heavy: heavy)
                       : state.acquire(now: context.loop.now, heavy: heavy, isUsable: { $0.isUsable }) {
        case let .reuse(conn, stale):
            for c in stale { c.close() }
            conn.attach(client, method: method, reused: true)
            return .success(conn)
        case let .connect(index, stale):
            for c in stale { c.close() }
            address = addresses[index]
        case let .noAddress(stale):
            for c in stale { c.close() }
            return .failure(.connectRefused)
        case let .rateLimited(stale):
            for c in stale { c.close() }
            return .failure(.connectRateLimited)
        case let .addressLimited(stale):
            for c in stale { c.close() }
            return .failure(.addressBusy)
        }
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
        do { try context.loop.register(connected.fd, conn) } catch {
            Socket.close(connected.fd)
            return .failure(.connectRefused)
        }
        conn.attach(client, method: method, reused: false, upgrade: upgrade)
        return .success(conn)
    }

    /// A new connected (or connecting) socket for an HTTP/2 connection, within the same address rotation and connect
    /// budget as HTTP/1.1 connections (`heavy`: see `UpstreamPoolState.acquire`); TLS started with `tls` when given.
    struct NewSocket {
        let fd: Int32
        let connected: Bool
        let tls: TLSStream?
    }

    func newSocket(heavy: Bool, tls: TLSClientContext?) -> Result<NewSocket, UpstreamFailure> {
        let address: SocketAddress
        switch state.newConnection(now: context.loop.now, heavy: heavy) {
        case .connect(let index, _): address = addresses[index]
        case .reuse, .noAddress: return .failure(.connectRefused)
        case .rateLimited: return .failure(.connectRateLimited)
        case .addressLimited: return .failure(.addressBusy)
        }
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
        return .success(NewSocket(fd: connected.fd, connected: connected.connected, tls: stream))
    }

    /// An HTTP/2 connection closed.
    func h2Closed(_ conn: H2UpstreamConnection) { h2?.closed(conn) }

    /// Takes back a connection whose exchange finished cleanly.
    func release(_ conn: UpstreamConnection) {
        guard state.release(conn) else {
            conn.close()
            return
        }
        conn.becomeIdle(until: context.loop.now + context.runtime.idleTimeoutNS)
    }

    /// An idle connection closed or timed out.
    func remove(_ conn: UpstreamConnection) {
        state.remove(conn)
    }

    /// Closes idle connections and makes busy ones close when done (config reload, shutdown).
    func retire() {
        for c in state.retire() { c.close() }
        h2?.retire()
    }
}
