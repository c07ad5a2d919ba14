/// The bookkeeping of one loop's keep-alive pool to one upstream, as a value type: events in, actions out, no
/// sockets. `Connection` is whatever identifies a connection (the pool uses its `UpstreamConnection` objects;
/// tests use integers).
///
/// Rules: idle connections are reused newest first (LIFO keeps the working set warm, and the oldest ones time out
/// first); one that is no longer usable (the upstream closed it while idle) is closed and the next is tried; at most
/// `maxIdle` stay idle; addresses are used round-robin for new connections; after `retire` (a reload replaced the
/// pool, or shutdown) nothing is kept idle.
struct UpstreamPoolState<Connection: AnyObject> {
    enum Acquire {
        /// Reuse this idle connection; close the stale ones found on the way.
        case reuse(Connection, close: [Connection])
        /// Open a new connection to `addresses[address]`; close the stale ones found on the way.
        case connect(address: Int, close: [Connection])
        /// No address to connect to.
        case noAddress(close: [Connection])
    }

    let maxIdle: Int
    let addressCount: Int
    private(set) var idle: [Connection] = []
    private var nextAddress = 0
    private(set) var retired = false

    init(maxIdle: Int, addressCount: Int) {
        self.maxIdle = maxIdle
        self.addressCount = addressCount
    }

    /// A connection for one exchange. `isUsable` tells whether an idle connection is still open and clean.
    mutating func acquire(isUsable: (Connection) -> Bool) -> Acquire {
        var stale: [Connection] = []
        while let conn = idle.popLast() {
            if isUsable(conn) { return .reuse(conn, close: stale) }
            stale.append(conn)
        }
        guard addressCount > 0 else { return .noAddress(close: stale) }
        let address = nextAddress % addressCount
        nextAddress &+= 1
        return .connect(address: address, close: stale)
    }

    /// A connection finished its exchange cleanly: true when it is kept idle, false when it must be closed.
    mutating func release(_ conn: Connection) -> Bool {
        if retired || idle.count >= maxIdle { return false }
        idle.append(conn)
        return true
    }

    /// An idle connection closed or timed out.
    mutating func remove(_ conn: Connection) {
        if let i = idle.firstIndex(where: { $0 === conn }) { idle.remove(at: i) }
    }

    /// Stops keeping connections; returns the idle ones to close.
    mutating func retire() -> [Connection] {
        retired = true
        defer { idle.removeAll() }
        return idle
    }
}
