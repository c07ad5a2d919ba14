import EventLoop
import Synchronization

/// Open client connections per `ConnectionAddressKey`, across every loop (issue 25): taken at accept, given back
/// when the connection closes, never touched per request. Every accepted connection holds exactly one slot, also
/// while the bound is off or its peer is a trusted proxy, so a reload that turns the bound on or lowers it sees the
/// true counts. Addresses at 0 are removed, so the table holds at most one entry per open connection.
public final class ConnectionsPerAddress: Sendable {
    private let counts = Mutex<[ConnectionAddressKey: Int]>([:])

    public init() {}

    /// Takes a slot for `key`; false, taking nothing, when `limit` > 0 and the address already holds `limit`.
    package func acquire(_ key: ConnectionAddressKey, limit: Int) -> Bool {
        counts.withLock { c in
            let held = c[key, default: 0]
            if limit > 0 && held >= limit { return false }
            c[key] = held + 1
            return true
        }
    }

    /// Gives back the slot a connection from `key` held.
    package func release(_ key: ConnectionAddressKey) {
        counts.withLock { c in
            guard let held = c[key] else { return }
            if held > 1 {
                c[key] = held - 1
                return
            }
            c.removeValue(forKey: key)
            // A dictionary keeps its capacity: after a burst from many addresses has gone, give the memory back.
            if c.isEmpty {
                c = [:]
            } else if c.capacity > 4096 && c.count < c.capacity / 16 {
                c = Dictionary(uniqueKeysWithValues: c.map { ($0.key, $0.value) })
            }
        }
    }

    /// Connections `key` holds now.
    package func count(_ key: ConnectionAddressKey) -> Int { counts.withLock { $0[key, default: 0] } }

    /// Addresses holding at least one connection now.
    public var addresses: Int { counts.withLock { $0.count } }
}
