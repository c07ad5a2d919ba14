/// The bookkeeping of one loop's keep-alive pool to one upstream, as a value type: events in, actions out, no
/// sockets. `Connection` is whatever identifies a connection (the pool uses its `UpstreamConnection` objects;
/// tests use integers).
///
/// Rules: idle connections are reused newest first (LIFO keeps the working set warm, and the oldest ones time out
/// first); one that is no longer usable (the upstream closed it while idle) is closed and the next is tried; at most
/// `maxIdle` stay idle; addresses are used round-robin for new connections; new connections are rate-bounded
/// (`maxConnectsPerSecond`, a token bucket with a burst of the same size: a flood of requests, or of streams reset
/// right after they started, cannot turn into a flood of connects at the upstream); after `retire` (a reload
/// replaced the pool, or shutdown) nothing is kept idle.
public struct UpstreamPoolState<Connection: AnyObject> {
    public enum Acquire {
        /// Reuse this idle connection; close the stale ones found on the way.
        case reuse(Connection, close: [Connection])
        /// Open a new connection to `addresses[address]`; close the stale ones found on the way.
        case connect(address: Int, close: [Connection])
        /// No address to connect to.
        case noAddress(close: [Connection])
        /// No idle connection, and new connects are past `maxConnectsPerSecond`.
        case rateLimited(close: [Connection])
        /// No idle connection, and the client is `heavy` while the connect budget is down to its last half.
        case addressLimited(close: [Connection])
    }

    public let maxIdle: Int
    public let addressCount: Int
    public private(set) var idle: [Connection] = []
    private var nextAddress = 0
    public private(set) var retired = false
    /// New connections allowed per second (and in a burst); 0 = unbounded.
    public let maxConnectsPerSecond: Double
    private var connectTokens: Double
    private var tokensAt: UInt64

    public init(maxIdle: Int, addressCount: Int, maxConnectsPerSecond: Int = 0, now: UInt64 = 0) {
        self.maxIdle = maxIdle
        self.addressCount = addressCount
        self.maxConnectsPerSecond = Double(maxConnectsPerSecond)
        connectTokens = Double(maxConnectsPerSecond)
        tokensAt = now
    }

    /// A connection for one exchange at monotonic time `now` (nanoseconds). `isUsable` tells whether an idle
    /// connection is still open and clean. `heavy`: the client address has another request in progress at this
    /// upstream (`max_upstream_requests_per_address` is on), so it may connect only while at least half of the
    /// connect burst is left; the rest is kept for other addresses (issue 39: one address churning zero-window streams
    /// spent the whole budget and everyone got 503).
    public mutating func acquire(now: UInt64 = 0, heavy: Bool = false, isUsable: (Connection) -> Bool) -> Acquire {
        var stale: [Connection] = []
        while let conn = idle.popLast() {
            if isUsable(conn) { return .reuse(conn, close: stale) }
            stale.append(conn)
        }
        return newConnection(now: now, heavy: heavy, closing: stale)
    }

    /// A new connection whatever is idle (a WebSocket handshake never takes a pooled one), within the same address
    /// rotation and connect rate.
    public mutating func newConnection(now: UInt64, heavy: Bool = false, closing stale: [Connection] = []) -> Acquire {
        guard addressCount > 0 else { return .noAddress(close: stale) }
        if maxConnectsPerSecond > 0 {
            if now > tokensAt {
                connectTokens = min(maxConnectsPerSecond, connectTokens + Double(now - tokensAt) / 1e9 * maxConnectsPerSecond)
                tokensAt = now
            }
            guard connectTokens >= 1 else { return .rateLimited(close: stale) }
            if heavy && connectTokens < maxConnectsPerSecond / 2 { return .addressLimited(close: stale) }
            connectTokens -= 1
        }
        let address = nextAddress % addressCount
        nextAddress &+= 1
        return .connect(address: address, close: stale)
    }

    /// A connection finished its exchange cleanly: true when it is kept idle, false when it must be closed.
    public mutating func release(_ conn: Connection) -> Bool {
        if retired || idle.count >= maxIdle { return false }
        idle.append(conn)
        return true
    }

    /// An idle connection closed or timed out.
    public mutating func remove(_ conn: Connection) {
        if let i = idle.firstIndex(where: { $0 === conn }) { idle.remove(at: i) }
    }

    /// Stops keeping connections; returns the idle ones to close.
    public mutating func retire() -> [Connection] {
        retired = true
        defer { idle.removeAll() }
        return idle
    }
}
