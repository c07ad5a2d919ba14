import HTTPWire
import ProxyCore
import Testing

/// `TrailerFilter.allows`: which trailer fields are passed on, either way (RFC 9110 §6.5.1).
@Suite struct TrailerFilterTests {
    /// Every name the filter documents as dropped: RFC 9110 §7.6.1's hop-by-hop fields and the framing, routing,
    /// authentication and control fields.
    static let refused = [
        "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade", "proxy-authenticate",
        "proxy-authorization", "trailer", "content-length", "content-type", "content-encoding", "content-range", "host",
        "authorization", "cookie", "set-cookie", "expect", "cache-control", "x-request-id", "x-firebase-appcheck", "dpop",
    ]

    static func allows(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { TrailerFilter.allows(UnsafeRawBufferPointer($0)) }
    }

    @Test func theListedNamesAreRefusedInAnyCase() {
        #expect(Set(HTTPHeaderName.hopByHop).isSubset(of: Set(Self.refused)))
        for name in Self.refused {
            #expect(!Self.allows(name), "\(name)")
            #expect(!Self.allows(name.uppercased()), "\(name.uppercased())")
            #expect(!Self.allows(name.prefix(1).uppercased() + name.dropFirst()), "\(name)")
        }
    }

    @Test func pseudoUnderscoreAndAppCheckNamesAreRefused() {
        for name in [":status", ":path", "grpc_status", "X-AppCheck-Status", "x-appcheck-app-id", ""] {
            #expect(!Self.allows(name), "\(name)")
        }
    }

    /// Names of the refused lengths that are none of them, and gRPC's own trailers, pass.
    @Test func otherNamesPass() {
        for name in ["grpc-status", "grpc-message", "grpc-status-details-bin", "tf", "hostx", "hots", "cookies",
                     "upgrades", "trailers", "connectio", "keep-alivf", "set-cookif", "content-typf", "x-request-ie",
                     "content-rangf", "authorizatioo", "cache-controm", "content-lengtg", "proxy-connectiom",
                     "content-encodinf", "transfer-encodinf", "proxy-authenticatf", "proxy-authorizatiom",
                     "x-firebase-appcheca", "dpoq", "server-timing", "x-custom"] {
            #expect(Self.allows(name), "\(name)")
        }
    }
}
