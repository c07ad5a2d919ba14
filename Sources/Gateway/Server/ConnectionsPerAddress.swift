import EventLoop
import Synchronization

/// The address a client connection is counted under for `server.limits.max_connections_per_address`: an IPv4
/// address (/32), or the /64 prefix of an IPv6 address (one subscriber's network: a client picks the low 64 bits at
/// will). An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is its IPv4 address. Two words, hashed without allocating.
struct ConnectionAddressKey: Hashable, Sendable, CustomStringConvertible {
    /// 4 for IPv4, 6 for IPv6, 0 for a peer of neither family (all such peers share one key).
    let family: UInt8
    /// IPv4: the address (big-endian bytes read as a number); IPv6: the first 8 bytes, likewise.
    let bits: UInt64

    /// The key of raw address bytes: 4 or 16 of them, as `SocketAddress.ipBytes` gives.
    init(ipBytes b: [UInt8]) {
        if b.count == 4 {
            family = 4
            bits = UInt64(b[0]) << 24 | UInt64(b[1]) << 16 | UInt64(b[2]) << 8 | UInt64(b[3])
        } else if b.count == 16 {
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF {
                family = 4
                bits = UInt64(b[12]) << 24 | UInt64(b[13]) << 16 | UInt64(b[14]) << 8 | UInt64(b[15])
            } else {
                family = 6
                var prefix: UInt64 = 0
                for i in 0..<8 { prefix = prefix << 8 | UInt64(b[i]) }
                bits = prefix
            }
        } else {
            family = 0
            bits = 0
        }
    }

    init(_ peer: SocketAddress) { self.init(ipBytes: peer.ipBytes) }

    /// `192.0.2.7` or `2001:db8:0:1::/64` (for logs).
    var description: String {
        switch family {
        case 4:
            return "\(bits >> 24 & 0xFF).\(bits >> 16 & 0xFF).\(bits >> 8 & 0xFF).\(bits & 0xFF)"
        case 6:
            let groups = (0..<4).map { String(bits >> (48 - 16 * UInt64($0)) & 0xFFFF, radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        default:
            return "unknown"
        }
    }
}

/// Open client connections per `ConnectionAddressKey`, across every loop (issue 25): taken at accept, given back
/// when the connection closes, never touched per request. Every accepted connection holds exactly one slot, also
/// while the bound is off or its peer is a trusted proxy, so a reload that turns the bound on or lowers it sees the
/// true counts. Addresses at 0 are removed, so the table holds at most one entry per open connection.
final class ConnectionsPerAddress: Sendable {
    private let counts = Mutex<[ConnectionAddressKey: Int]>([:])

    /// Takes a slot for `key`; false, taking nothing, when `limit` > 0 and the address already holds `limit`.
    func acquire(_ key: ConnectionAddressKey, limit: Int) -> Bool {
        counts.withLock { c in
            let held = c[key, default: 0]
            if limit > 0 && held >= limit { return false }
            c[key] = held + 1
            return true
        }
    }

    /// Gives back the slot a connection from `key` held.
    func release(_ key: ConnectionAddressKey) {
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
    func count(_ key: ConnectionAddressKey) -> Int { counts.withLock { $0[key, default: 0] } }

    /// Addresses holding at least one connection now.
    var addresses: Int { counts.withLock { $0.count } }
}
