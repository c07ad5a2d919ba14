import Foundation
import Glibc
import GatewayTools
import Testing
import TestSupport

/// Issue 15 item 5: out of file descriptors, the gateway neither spins on `accept` nor stays stuck. The built
/// binary runs with `RLIMIT_NOFILE` = 64 (`prlimit`); clients hold upstream requests until every descriptor
/// is in use, then more clients connect.
@Suite struct DescriptorExhaustionTests {
    static let limit = 64

    /// The bound per address is off (`perAddress` 0) where one test client must take every slot.
    static func config(upstreamPort: UInt16, perAddress: Int = 0) -> String {
        """
        server:
          listen: ["127.0.0.1:0"]
          admin_listen: "127.0.0.1:0"
          threads: 1
          limits:
            max_connections: 1000
            max_connections_per_address: \(perAddress)
            header_timeout: 5s
            idle_timeout: 30s
            shutdown_grace: 1s
        app_check:
          project_number: "123456789012"
        upstreams:
          api:
            url: http://127.0.0.1:\(upstreamPort)
            connect_timeout: 2s
            response_timeout: 20s
        routes:
          - name: all
            prefix: /
            upstream: api
            enforcement: off
        """
    }

    /// Waits (at most `timeout` seconds, polling) until `condition` holds.
    static func wait(_ timeout: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    @Test func exhaustedDescriptorsPauseAcceptingAndClientsAreServedOnceTheyFreeUp() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gw-\(UUID().uuidString).yaml").path
        try Self.config(upstreamPort: upstream.address.port).write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gw = try GatewayProcess.serve(config: path, launcher: ["/usr/bin/prlimit", "--nofile=\(Self.limit)"])
        defer { gw.signal(SIGKILL); _ = gw.waitForExit(timeout: 5) }

        // At start: max_connections is clamped to what 64 descriptors hold, in one log line.
        let clamp = try #require(gw.lines.first { $0.contains("max_connections lowered") })
        #expect(clamp.contains("\"configured\":1000") && clamp.contains("\"rlimit_nofile\":\(Self.limit)"))
        let effective = try #require(clamp.split(separator: ",").first { $0.hasPrefix("\"effective\":") }
            .flatMap { Int($0.split(separator: ":")[1]) })
        #expect(effective > 0 && effective < Self.limit)

        // Admitted clients, each with a request the upstream holds for 6 s: the gateway opens an upstream
        // connection for each until the descriptors run out (those that find none get a 502).
        var holders: [RawHTTPClient] = []
        for _ in 0..<effective {
            let c = try RawHTTPClient(port: gw.port, timeout: 15)
            try c.send("GET /delay/6000 HTTP/1.1\r\nHost: a\r\n\r\n")
            holders.append(c)
        }
        #expect(Self.wait(10) { (gw.openDescriptors ?? 0) >= Self.limit }, "descriptors in use: \(gw.openDescriptors ?? -1)")

        // More clients: the kernel queues them; accept fails with EMFILE and the gateway pauses accepting.
        var waiting: [RawHTTPClient] = []
        for _ in 0..<10 { waiting.append(try RawHTTPClient(port: gw.port, timeout: 15)) }
        try gw.waitForLine(containing: "accept paused", timeout: 5)

        // Spinning on accept would burn about a CPU second per second; paused, the gateway idles.
        let window = 1.5
        let before = try #require(gw.cpuSeconds)
        usleep(UInt32(window * 1_000_000))
        let after = try #require(gw.cpuSeconds)
        #expect(after - before < window / 4, "\(after - before) CPU seconds in a \(window) s window")
        #expect(gw.lines.filter { $0.contains("accept paused") }.count == 1)

        // The upstream answers the holders, who then leave: the descriptors free up, the gateway accepts the
        // queued clients and serves them. (Descriptors freed in the same event batch as a new request's
        // upstream connect may still be in use: a later queued client must be served, the first may see 502.)
        for c in holders { _ = try? c.readResponse() }
        holders.removeAll()  // closes them
        var statuses: [Int] = []
        var unanswered: [String] = []
        for c in waiting where !statuses.contains(200) {
            try c.send("GET /status/200 HTTP/1.1\r\nHost: a\r\n\r\n")
            do { statuses.append(try c.readResponse().status) } catch { unanswered.append("\(error)") }
        }
        #expect(statuses.contains(200), "answered \(statuses), unanswered \(unanswered)")
    }

    /// Issue 25: under a low descriptor limit, one address may hold at most half of the slots that are left, so a
    /// client holding hundreds of idle connections leaves room for everyone else.
    @Test func oneAddressGetsAtMostHalfOfTheClampedSlots() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gw-\(UUID().uuidString).yaml").path
        try Self.config(upstreamPort: upstream.address.port, perAddress: 1000).write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gw = try GatewayProcess.serve(config: path, launcher: ["/usr/bin/prlimit", "--nofile=\(Self.limit)"])
        defer { gw.signal(SIGKILL); _ = gw.waitForExit(timeout: 5) }
        func effective(_ line: String) -> Int? {
            line.split(separator: ",").first { $0.hasPrefix("\"effective\":") }
                .flatMap { Int($0.split(separator: ":")[1].filter(\.isNumber)) }
        }
        let clamp = try #require(gw.lines.first { $0.contains("max_connections lowered") })
        let slots = try #require(effective(clamp))
        let perAddress = try #require(gw.lines.first { $0.contains("max_connections_per_address lowered") })
        #expect(effective(perAddress) == slots / 2)
        // One address fills its half; its next connection is closed unanswered while another address is served.
        var held: [RawHTTPClient] = []
        for _ in 0..<(slots / 2) { held.append(try RawHTTPClient(port: gw.port, timeout: 5)) }
        let over = try RawHTTPClient(port: gw.port, timeout: 3)
        #expect(over.waitForClose(timeout: 3), "the connection past the address's half was not closed")
        let other = try RawHTTPClient.roundTrip(port: gw.port, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", source: "127.0.0.2")
        #expect(other.status == 200)
        held.removeAll()
    }
}
