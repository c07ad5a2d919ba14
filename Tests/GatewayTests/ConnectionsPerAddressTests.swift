import EventLoop
import Foundation
@testable import Gateway
@testable import ProxyCore
@testable import GatewayProcess
@testable import GatewayConfig
import Glibc
import TestSupport
import Testing

/// Issue 25: `server.limits.max_connections_per_address` (SPEC §3, §6: no address holds more than it), over real
/// sockets on loopback; all of 127.0.0.0/8 is loopback on Linux, so 127.0.0.2 is a second client address.
@Suite struct ConnectionsPerAddressTests {
    static let routes = """
      - name: open
        prefix: /
        upstream: api
        enforcement: off
    """
    static let local = ConnectionAddressKey(ipBytes: [127, 0, 0, 1])
    static let other = ConnectionAddressKey(ipBytes: [127, 0, 0, 2])

    /// Long timeouts: the held connections stay open however slow the machine is.
    static func harness(perAddress: String, server: String = "", pki: TestPKI? = nil) throws -> GatewayHarness {
        var extra = server
        if let pki {
            extra += """

              tls:
                listen: ["127.0.0.1:0"]
                certificate: \(pki.cert)
                private_key: \(pki.key)
            """
        }
        return try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: routes, server: extra, limits: [
                "max_connections_per_address": perAddress, "header_timeout": "30s", "idle_timeout": "30s",
            ])
        }
    }

    /// Waits until `key` holds `count` connections in the gateway's table.
    static func waitFor(_ h: GatewayHarness, _ key: ConnectionAddressKey, holds count: Int, timeout: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if h.server.connectionsPerAddress.count(key) == count { return true }
            usleep(10_000)
        }
        return h.server.connectionsPerAddress.count(key) == count
    }

    /// Opens `n` connections from `source` and waits until the gateway counts them all.
    static func hold(_ n: Int, from source: String, _ h: GatewayHarness, key: ConnectionAddressKey,
                     already: Int = 0) throws -> [RawHTTPClient] {
        var held: [RawHTTPClient] = []
        for _ in 0..<n { held.append(try RawHTTPClient(port: h.port, source: source)) }
        try #require(waitFor(h, key, holds: already + n), "the gateway counts \(already + n) connections from \(source)")
        return held
    }

    /// True when the gateway closes `c` without a byte (EOF or a reset) within `within` seconds.
    static func closedWithoutAnswer(_ c: RawHTTPClient, within: Double = 3) -> Bool {
        var pfd = pollfd(fd: c.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(within * 1000)) > 0 else { return false }
        var byte: UInt8 = 0
        let n = recv(c.fd, &byte, 1, 0)
        return n == 0 || (n < 0 && errno == ECONNRESET)
    }

    /// One request on `c`; its status.
    static func status(_ c: RawHTTPClient) throws -> Int {
        try c.send("GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
        return try c.readResponse().status
    }

    static func metrics(_ h: GatewayHarness) throws -> String {
        try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
    }

    @Test func connectionPastTheBoundIsClosedUnansweredWhileAnotherAddressIsServed() throws {
        let h = try Self.harness(perAddress: "5")
        defer { h.stop() }
        var five = try Self.hold(5, from: "127.0.0.1", h, key: Self.local)

        let sixth = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(Self.closedWithoutAnswer(sixth), "the 6th connection from 127.0.0.1 is closed without an answer")
        #expect(h.server.connectionsPerAddress.count(Self.local) == 5)

        // Another address at the same time, and the five held ones, are served.
        let other = try RawHTTPClient(port: h.port, source: "127.0.0.2")
        #expect(try Self.status(other) == 200)
        #expect(try Self.status(five[4]) == 200)

        // One of the five goes: its slot is free again.
        five.removeFirst()
        #expect(Self.waitFor(h, Self.local, holds: 4))
        let again = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(try Self.status(again) == 200)

        let text = try Self.metrics(h)
        #expect(text.contains("gateway_connections_refused_total{reason=\"per_address\"} 1\n"), "\(text)")
        let lines = h.logLines().filter { $0.contains("connections refused: too many from one address") }
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.contains("\"address\":\"127.0.0.1\"") == true, "\(lines)")
        #expect(lines.first?.contains("\"max_connections_per_address\":5") == true, "\(lines)")
        withExtendedLifetime((sixth, other, again)) {}
    }

    @Test func everyClosedConnectionGivesItsSlotBackAndTheTableEmpties() throws {
        let h = try Self.harness(perAddress: "3")
        defer { h.stop() }
        do {
            let held = try Self.hold(3, from: "127.0.0.1", h, key: Self.local)
            let served = try Self.hold(2, from: "127.0.0.2", h, key: Self.other)
            for c in held + served { #expect(try Self.status(c) == 200) }
            let refused = try RawHTTPClient(port: h.port, source: "127.0.0.1")
            #expect(Self.closedWithoutAnswer(refused))
        }
        let deadline = Date().addingTimeInterval(5)
        while h.server.connectionsPerAddress.addresses > 0 && Date() < deadline { usleep(10_000) }
        #expect(h.server.connectionsPerAddress.addresses == 0)
        #expect(h.server.openConnections == 0)
    }

    @Test func refusalsAreLoggedAtMostOncePerSecond() throws {
        let h = try Self.harness(perAddress: "1")
        defer { h.stop() }
        let held = try Self.hold(1, from: "127.0.0.1", h, key: Self.local)
        for _ in 0..<20 {
            let c = try RawHTTPClient(port: h.port, source: "127.0.0.1")
            #expect(Self.closedWithoutAnswer(c))
        }
        let text = try Self.metrics(h)
        #expect(text.contains("gateway_connections_refused_total{reason=\"per_address\"} 20\n"), "\(text)")
        let lines = h.logLines().filter { $0.contains("connections refused: too many from one address") }
        #expect((1...2).contains(lines.count), "20 refusals in well under 2 s: \(lines)")
        withExtendedLifetime(held) {}
    }

    @Test func anH2cConnectionCountsLikeAnHTTP1One() throws {
        let h = try Self.harness(perAddress: "2")
        defer { h.stop() }
        let h1 = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(try Self.status(h1) == 200)
        var h2: RawHTTPClient? = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        // The prior-knowledge preface and an empty SETTINGS frame: the gateway answers with its own SETTINGS.
        try h2?.send(Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0])
        let settings = h2?.readRaw(timeout: 5) ?? []
        #expect(settings.count >= 9 && settings[3] == 4, "a SETTINGS frame from the gateway: \(settings)")
        #expect(Self.waitFor(h, Self.local, holds: 2))

        let third = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(Self.closedWithoutAnswer(third), "the h2c connection holds one of the two slots")

        // The HTTP/2 connection closes: its slot is given back once.
        h2 = nil
        #expect(Self.waitFor(h, Self.local, holds: 1))
        let again = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(try Self.status(again) == 200)
        withExtendedLifetime((h1, third, h2)) {}
    }

    @Test func zeroTurnsTheBoundOff() throws {
        let h = try Self.harness(perAddress: "0")
        defer { h.stop() }
        let held = try Self.hold(8, from: "127.0.0.1", h, key: Self.local)
        let ninth = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(try Self.status(ninth) == 200)
        #expect(!(try Self.metrics(h)).contains("gateway_connections_refused_total{"))
        withExtendedLifetime(held) {}
    }

    @Test func trustedProxiesAreExempt() throws {
        let h = try Self.harness(perAddress: "2", server: "  trusted_proxies: [\"127.0.0.1/32\"]")
        defer { h.stop() }
        let proxy = try Self.hold(4, from: "127.0.0.1", h, key: Self.local)
        let fifth = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(try Self.status(fifth) == 200, "a trusted proxy holds more than the bound")
        // Another address is still bound.
        let client = try Self.hold(2, from: "127.0.0.2", h, key: Self.other)
        let third = try RawHTTPClient(port: h.port, source: "127.0.0.2")
        #expect(Self.closedWithoutAnswer(third))
        withExtendedLifetime((proxy, client)) {}
    }

    @Test func aReloadChangesTheBoundForNewConnections() throws {
        let h = try Self.harness(perAddress: "0")
        defer { h.stop() }
        let held = try Self.hold(3, from: "127.0.0.1", h, key: Self.local)
        let yaml = GatewayHarness.config(upstream: h.upstreamURL, routes: Self.routes, limits: [
            "max_connections_per_address": "2", "header_timeout": "30s", "idle_timeout": "30s",
        ])
        try h.server.reload(try ConfigLoader.load(yaml: yaml, path: "reload.yaml", environment: [:]).get())
        // Connections held while the bound was off were counted: the next one from 127.0.0.1 is past the new bound.
        var refused = false
        var accepted: [RawHTTPClient] = []
        let deadline = Date().addingTimeInterval(5)
        while !refused && Date() < deadline {
            let c = try RawHTTPClient(port: h.port, source: "127.0.0.1")
            if Self.closedWithoutAnswer(c, within: 0.3) { refused = true } else { accepted.append(c) }
        }
        #expect(refused)
        let other = try RawHTTPClient(port: h.port, source: "127.0.0.2")
        #expect(try Self.status(other) == 200)
        withExtendedLifetime((held, accepted)) {}
    }

    @Test func aFailedTLSHandshakeGivesItsSlotBack() throws {
        let pki = try TestPKI()
        let h = try Self.harness(perAddress: "1", pki: pki)
        defer { h.stop() }
        let tlsPort = try #require(h.server.tlsListenAddresses.first?.port)
        for _ in 0..<3 {
            let c = try RawHTTPClient(port: tlsPort, source: "127.0.0.1")
            try c.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")  // not a ClientHello: the handshake fails
            _ = c.waitForClose(timeout: 3)
            #expect(Self.waitFor(h, Self.local, holds: 0), "the failed handshake's slot is free")
        }
        // The one slot is free: a plain connection from the same address is served.
        let c = try RawHTTPClient(port: h.port, source: "127.0.0.1")
        #expect(try Self.status(c) == 200)
        #expect(h.server.connectionsPerAddress.count(Self.local) == 1)
    }
}

/// The key connections are counted under, and the table (no sockets).
@Suite struct ConnectionAddressKeyTests {
    static func key(_ ip: String) throws -> ConnectionAddressKey {
        ConnectionAddressKey(try #require(SocketAddress(ip: ip, port: 443)))
    }

    @Test func ipv4IsTheWholeAddress() throws {
        #expect(try Self.key("192.0.2.7") == Self.key("192.0.2.7"))
        #expect(try Self.key("192.0.2.7") != Self.key("192.0.2.8"))
        #expect(try Self.key("192.0.2.7").description == "192.0.2.7")
        #expect(ConnectionAddressKey(ipBytes: [192, 0, 2, 7]) == (try Self.key("192.0.2.7")))
    }

    @Test func ipv6IsGroupedByItsSlash64() throws {
        let a = try Self.key("2001:db8:0:1::1")
        #expect(a == (try Self.key("2001:db8:0:1:ffff:ffff:ffff:ffff")))
        #expect(a == (try Self.key("2001:db8:0:1:1234:5678:9abc:def0")))
        #expect(a != (try Self.key("2001:db8:0:2::1")))
        #expect(a != (try Self.key("2001:db9:0:1::1")))
        #expect(a.description == "2001:db8:0:1::/64")
    }

    @Test func anIPv4MappedIPv6AddressIsItsIPv4Address() throws {
        #expect(try Self.key("::ffff:192.0.2.7") == Self.key("192.0.2.7"))
        var mapped = [UInt8](repeating: 0, count: 16)
        mapped[10] = 0xFF; mapped[11] = 0xFF
        mapped[12] = 192; mapped[13] = 0; mapped[14] = 2; mapped[15] = 7
        #expect(ConnectionAddressKey(ipBytes: mapped) == (try Self.key("192.0.2.7")))
    }

    @Test func familiesNeverCollide() throws {
        // IPv4 0.0.0.1 and the IPv6 /64 whose prefix is numerically 1 are different keys.
        #expect(try Self.key("0.0.0.1") != Self.key("0:0:0:1::"))
        #expect(try Self.key("0.0.0.0") != Self.key("::1"))
    }

    @Test func theTableBoundsEachAddressAndForgetsAddressesAtZero() {
        let table = ConnectionsPerAddress()
        let a = ConnectionAddressKey(ipBytes: [10, 0, 0, 1])
        let b = ConnectionAddressKey(ipBytes: [10, 0, 0, 2])
        #expect(table.acquire(a, limit: 2))
        #expect(table.acquire(a, limit: 2))
        #expect(!table.acquire(a, limit: 2))
        #expect(table.count(a) == 2)
        #expect(table.acquire(b, limit: 2))
        #expect(table.acquire(a, limit: 0), "0: no bound, still counted")
        #expect(table.count(a) == 3)
        #expect(table.addresses == 2)
        for _ in 0..<3 { table.release(a) }
        table.release(b)
        #expect(table.addresses == 0)
        #expect(table.count(a) == 0)
        // Many addresses come and go: all forgotten.
        for i in 0..<10_000 { _ = table.acquire(ConnectionAddressKey(ipBytes: [10, 1, UInt8(i >> 8), UInt8(i & 0xFF)]), limit: 1) }
        #expect(table.addresses == 10_000)
        for i in 0..<10_000 { table.release(ConnectionAddressKey(ipBytes: [10, 1, UInt8(i >> 8), UInt8(i & 0xFF)])) }
        #expect(table.addresses == 0)
    }
}
