import Foundation

/// The address a client connection is counted under for `server.limits.max_connections_per_address`: an IPv4
/// address (/32), or the /64 prefix of an IPv6 address (one subscriber's network: a client picks the low 64 bits at
/// will). An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is its IPv4 address. Two words, hashed without allocating.
package struct ConnectionAddressKey: Hashable, Sendable, CustomStringConvertible {
    /// 4 for IPv4, 6 for IPv6, 0 for a peer of neither family (all such peers share one key).
    package let family: UInt8
    /// IPv4: the address (big-endian bytes read as a number); IPv6: the first 8 bytes, likewise.
    package let bits: UInt64

    /// The key of raw address bytes: 4 or 16 of them, as `SocketAddress.ipBytes` gives.
    package init(ipBytes b: [UInt8]) {
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

    package init(_ peer: SocketAddress) { self.init(ipBytes: peer.ipBytes) }

    /// One word for the hasher, the family in the top byte (free in an IPv4 key; an IPv6 prefix may then share its
    /// hash with another key, never its equality): one `combine` instead of the synthesized two. The key is hashed on
    /// every proxied request (`UpstreamPool`'s per-address counts).
    package func hash(into hasher: inout Hasher) { hasher.combine(bits ^ UInt64(family) &<< 56) }

    /// `192.0.2.7` or `2001:db8:0:1::/64` (for logs).
    package var description: String {
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

/// The key a client is limited by (docs/issuer.md, Limits): the text of its `ConnectionAddressKey` — an IPv4
/// address (/32), or the /64 prefix of an IPv6 address (a client can change the low 64 bits at will); an
/// IPv4-mapped IPv6 address is its IPv4 address.
package enum ClientAddressKey {
    /// The key of raw address bytes (4 or 16 of them, as `SocketAddress.ipBytes` gives).
    package static func key(ipBytes: [UInt8]) -> String { ConnectionAddressKey(ipBytes: ipBytes).description }

    /// The key of an address written as text (an `X-Forwarded-For` element); nil when it is no IP address.
    package static func key(text: Substring) -> String? {
        var trimmed = String(text.trimmingCharacters(in: .whitespaces))
        if trimmed.hasPrefix("[") && trimmed.hasSuffix("]") { trimmed = String(trimmed.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, trimmed, &v4) == 1 {
            return key(ipBytes: withUnsafeBytes(of: &v4) { Array($0) })
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, trimmed, &v6) == 1 {
            return key(ipBytes: withUnsafeBytes(of: &v6) { Array($0) })
        }
        return nil
    }
}
