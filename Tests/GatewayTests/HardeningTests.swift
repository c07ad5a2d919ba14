import EventLoop
import Foundation
@testable import Gateway
@testable import ProxyCore
@testable import GatewayConfig
import Glibc
import HTTPWire
import TestSupport
import Testing

/// Issue 15 (hardening) regressions, over real sockets: `_` header names (#8), the request writer's own
/// CR/LF/NUL refusal (#6), `header_timeout` from accept (#9) and `body_timeout` (#2), on HTTP/1.1 and HTTP/2.
@Suite struct HardeningTests {
    static let routes = """
      - name: open
        prefix: /
        upstream: api
        enforcement: off
        max_body_bytes: 20MiB
    """

    // MARK: #8 header names with `_`

    @Test func underscoreHeaderNamesAreNeverForwardedOverHTTP1OrHTTP2() throws {
        let h = try GatewayHarness { GatewayHarness.config(upstream: $0, routes: Self.routes) }
        defer { h.stop() }
        let r = try RawHTTPClient.roundTrip(port: h.port, """
            GET /h1 HTTP/1.1\r
            Host: a\r
            X_AppCheck_Status: verified\r
            X_Forwarded_For: 10.9.8.7\r
            X-Kept: yes\r
            \r

            """)
        #expect(r.status == 200)
        let seen1 = try #require(h.upstream.receivedHeads.last { $0.hasPrefix("GET /h1 ") })
        #expect(seen1.contains("X-Kept: yes\n"))
        #expect(!seen1.lowercased().contains("x_appcheck_status"), "\(seen1)")
        #expect(!seen1.lowercased().contains("x_forwarded_for"), "\(seen1)")
        #expect(!seen1.contains("10.9.8.7"), "\(seen1)")

        let c = try Run.command("curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                                         "--http2-prior-knowledge", "-H", "X_AppCheck_Status: verified",
                                         "-H", "X_Forwarded_For: 10.9.8.7", "-H", "X-Kept: yes",
                                         "http://127.0.0.1:\(h.port)/h2"], timeout: 30)
        #expect(c.stdout == "200 2", "\(c.stdout) \(c.stderr)")
        let seen2 = try #require(h.upstream.receivedHeads.last { $0.hasPrefix("GET /h2 ") })
        #expect(seen2.lowercased().contains("x-kept: yes\n"))
        #expect(!seen2.lowercased().contains("x_appcheck_status"), "\(seen2)")
        #expect(!seen2.lowercased().contains("x_forwarded_for"), "\(seen2)")
        #expect(!seen2.contains("10.9.8.7"), "\(seen2)")
    }

    // MARK: #6 the writer refuses CR, LF and NUL whatever their source

    static func writerInputs() throws -> (HTTPRequestHead, RequestTarget, CompiledRoute, UpstreamSettings) {
        let yaml = GatewayHarness.config(upstream: "http://127.0.0.1:9", routes: routes)
        let settings = try ConfigLoader.load(yaml: yaml, path: "hardening.yaml", environment: [:]).get()
        var parser = HTTPRequestHeadParser()
        let bytes = Array("GET /a?b=1 HTTP/1.1\r\nHost: a\r\nX-Kept: yes\r\n\r\n".utf8)
        guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
            throw HarnessError("head did not parse")
        }
        let target = try RequestTarget.parse(head.target).get()
        return (head, target, CompiledRoute.compile(settings)[0], settings.upstreams[0])
    }

    static let skipped = AppCheckOutcome.skipped

    @Test func requestWriterWritesASafeHead() throws {
        let (head, target, route, upstream) = try Self.writerInputs()
        let written: [UInt8]? = RequestHeadWriter.write(head: head, target: target, route: route, upstream: upstream,
                                                        requestId: "abc", appCheck: Self.skipped, peerIP: "127.0.0.1", trusted: false,
                                                        scheme: "http")
        let out = try #require(written)
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.hasPrefix("GET /a?b=1 HTTP/1.1\r\n"))
        #expect(text.contains("\r\nX-Kept: yes\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
    }

    @Test(arguments: ["app-id\r\nGET /o/SMUG HTTP/1.1", "app\nid", "app\rid", "app\0id"])
    func requestWriterRefusesLineBreaksAndNULInAClaim(_ sub: String) throws {
        let (head, target, route, upstream) = try Self.writerInputs()
        let verified = AppCheckOutcome(status: .verified, outcome: .verified, appId: sub)
        let out: [UInt8]? = RequestHeadWriter.write(head: head, target: target, route: route, upstream: upstream,
                                                    requestId: "abc", appCheck: verified, peerIP: "127.0.0.1", trusted: false, scheme: "http")
        #expect(out == nil, "written: \(out.map { String(decoding: $0, as: UTF8.self) } ?? "")")
    }

    @Test func requestWriterRefusesLineBreaksInOtherValues() throws {
        let (head, target, route, upstream) = try Self.writerInputs()
        #expect(RequestHeadWriter.write(head: head, target: target, route: route, upstream: upstream,
                                        requestId: "x\r\nEvil: 1", appCheck: Self.skipped,
                                        peerIP: "127.0.0.1", trusted: false, scheme: "http") == nil)
        #expect(RequestHeadWriter.write(head: head, target: target, route: route, upstream: upstream,
                                        requestId: "abc", appCheck: Self.skipped, peerIP: "127.0.0.1\n", trusted: false,
                                        scheme: "http") == nil)
        var badTarget = target
        badTarget.query = "a\r\nb"
        #expect(RequestHeadWriter.write(head: head, target: badTarget, route: route, upstream: upstream,
                                        requestId: "abc", appCheck: Self.skipped, peerIP: "127.0.0.1", trusted: false,
                                        scheme: "http") == nil)
    }

    // MARK: #9 header_timeout from accept

    func silentHarness() throws -> GatewayHarness {
        try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: Self.routes, limits: ["header_timeout": "1s", "idle_timeout": "60s"])
        }
    }

    @Test func aConnectionThatSendsNothingIsClosedAfterHeaderTimeout() throws {
        let h = try silentHarness()
        defer { h.stop() }
        let c = try RawHTTPClient(port: h.port)
        // Generous: header_timeout is 1 s, idle_timeout 60 s.
        #expect(c.waitForClose(timeout: 20))
    }

    @Test func anH2CConnectionThatSendsNoRequestIsClosedAfterHeaderTimeout() throws {
        let h = try silentHarness()
        defer { h.stop() }
        let c = try RawHTTPClient(port: h.port)
        try c.send(TLSAndHTTP2Tests.preface)
        let deadline = Date().addingTimeInterval(20)
        var closed = false
        while Date() < deadline && !closed {
            _ = c.readRaw(timeout: 0.5)   // SETTINGS, then the GOAWAY
            closed = c.peerClosed
        }
        #expect(closed)
    }

    // MARK: #2 body_timeout

    /// A bare upstream: accepts one connection, reads what arrives, reports when the gateway closes it.
    final class BareUpstream {
        let listenFD: Int32
        let port: UInt16
        var conn: Int32 = -1

        init() throws {
            guard let addr = SocketAddress(ip: "127.0.0.1", port: 0) else { throw HarnessError("address") }
            listenFD = try Socket.listen(addr, backlog: 16, reusePort: false)
            port = Socket.localAddress(listenFD)?.port ?? 0
        }

        deinit {
            if conn >= 0 { Glibc.close(conn) }
            Glibc.close(listenFD)
        }

        func accept(timeout: Double) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
                if poll(&pfd, 1, 100) > 0, let (c, _) = Socket.accept(listenFD) {
                    conn = c
                    return true
                }
            }
            return false
        }

        /// Reads until EOF (true) or `timeout`; the bytes read so far go to `received`.
        func waitForEOF(timeout: Double, received: inout [UInt8]) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            var chunk = [UInt8](repeating: 0, count: 65536)
            while Date() < deadline {
                var pfd = pollfd(fd: conn, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 100) > 0 else { continue }
                let n = chunk.withUnsafeMutableBytes { recv(conn, $0.baseAddress, $0.count, 0) }
                if n == 0 { return true }
                if n < 0 { if errno == EAGAIN || errno == EINTR { continue }; return true }
                received += chunk[0..<n]
            }
            return false
        }
    }

    func bodyTimeoutHarness(_ upstream: BareUpstream) throws -> GatewayHarness {
        try GatewayHarness { _ in
            GatewayHarness.config(upstream: "http://127.0.0.1:\(upstream.port)", routes: Self.routes,
                                  limits: ["body_timeout": "1s", "idle_timeout": "60s"])
                .replacingOccurrences(of: "response_timeout: 2s", with: "response_timeout: 60s")
        }
    }

    @Test func aStalledHTTP1BodyIsAnswered408AndBothConnectionsClose() throws {
        let up = try BareUpstream()
        let h = try bodyTimeoutHarness(up)
        defer { h.stop() }
        let c = try RawHTTPClient(port: h.port, timeout: 20)
        try c.send("POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n0123456789")
        #expect(up.accept(timeout: 10), "the gateway never connected upstream")
        let r = try c.readResponse(requestMethod: "POST")
        #expect(r.status == 408)
        #expect(r.bodyText.contains("\"request_timeout\""), "\(r.bodyText)")
        #expect(c.waitForClose(timeout: 10))
        var got: [UInt8] = []
        #expect(up.waitForEOF(timeout: 10, received: &got), "the upstream connection stayed open")
        #expect(String(decoding: got, as: UTF8.self).hasPrefix("POST /upload HTTP/1.1\r\n"))
    }

    @Test func aStalledHTTP2BodyIsAnswered408AndItsUpstreamConnectionCloses() throws {
        let up = try BareUpstream()
        let h = try bodyTimeoutHarness(up)
        defer { h.stop() }
        let c = try RawHTTPClient(port: h.port, timeout: 20)
        // POST / with :authority a (HPACK static :method POST = 0x83), no END_STREAM, then 10 bytes of DATA.
        let post: [UInt8] = [0x83, 0x86, 0x84, 0x41, 0x01, UInt8(ascii: "a")]
        try c.send(TLSAndHTTP2Tests.preface + TLSAndHTTP2Tests.frame(1, flags: 0x4, stream: 1, post)
                   + TLSAndHTTP2Tests.frame(0, stream: 1, Array("0123456789".utf8)))
        #expect(up.accept(timeout: 10), "the gateway never connected upstream")
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline && !String(decoding: bytes, as: UTF8.self).contains("request_timeout") && !c.peerClosed {
            bytes += c.readRaw(timeout: 0.5)
        }
        #expect(String(decoding: bytes, as: UTF8.self).contains("\"request_timeout\""))
        // The stream's client half ends too: nghttp2 follows the complete 408 with RST_STREAM(NO_ERROR).
        var all = bytes
        let rstDeadline = Date().addingTimeInterval(10)
        func hasReset(_ b: [UInt8]) -> Bool {
            var i = 0
            while i + 9 <= b.count {
                let n = Int(b[i]) << 16 | Int(b[i + 1]) << 8 | Int(b[i + 2])
                if b[i + 3] == 3 && b[i + 8] == 1 && b[i + 5] == 0 && b[i + 6] == 0 && b[i + 7] == 0 { return true }
                i += 9 + n
            }
            return false
        }
        while Date() < rstDeadline && !hasReset(all) && !c.peerClosed { all += c.readRaw(timeout: 0.5) }
        #expect(hasReset(all), "no RST_STREAM on stream 1 after the 408")
        var got: [UInt8] = []
        #expect(up.waitForEOF(timeout: 10, received: &got), "the upstream connection stayed open")
        #expect(String(decoding: got, as: UTF8.self).hasPrefix("POST / HTTP/1.1\r\n"))
    }

    // MARK: #1 a client that goes away mid-request frees everything at once

    /// Sockets of this process in CLOSE-WAIT whose local port is `port` (from /proc/net/tcp).
    static func closeWaitCount(localPort port: UInt16) -> Int {
        let text = HalfCloseTests.readProcFile("/proc/net/tcp")
        let hexPort = String(format: ":%04X", Int(port))
        return text.split(separator: "\n").dropFirst().filter { line in
            let f = line.split(separator: " ")
            return f.count > 3 && f[1].hasSuffix(hexPort) && f[3] == "08"
        }.count
    }

    static func openConnections(_ h: GatewayHarness) throws -> String {
        let m = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        return m.split(separator: "\n").first { $0.hasPrefix("gateway_connections{state=\"open\"}") }.map(String.init) ?? ""
    }

    @Test(arguments: ["h2c", "http1"])
    func clientsClosingMidRequestBodyLeaveNothingOpen(_ proto: String) throws {
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: Self.routes, limits: ["idle_timeout": "60s", "body_timeout": "60s"])
                .replacingOccurrences(of: "response_timeout: 2s", with: "response_timeout: 60s")
                .replacingOccurrences(of: "threads: 1", with: "threads: 2")
        }
        defer { h.stop() }
        let post: [UInt8] = [0x83, 0x86, 0x84, 0x41, 0x01, UInt8(ascii: "a")]
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 16 * 1024)
        for round in 0..<3 {
            var clients: [RawHTTPClient] = []
            for _ in 0..<40 {
                let c = try RawHTTPClient(port: h.port)
                if proto == "h2c" {
                    try c.send(TLSAndHTTP2Tests.preface + TLSAndHTTP2Tests.frame(1, flags: 0x4, stream: 1, post)
                               + TLSAndHTTP2Tests.frame(0, stream: 1, chunk) + TLSAndHTTP2Tests.frame(0, stream: 1, chunk))
                } else {
                    try c.send(Array("POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000\r\n\r\n".utf8) + chunk + chunk)
                }
                clients.append(c)
            }
            // Rounds 0 and 1: the requests reach the upstream first (bounded); round 2: the clients leave at once,
            // while their upstream connections may still be connecting. Half close with RST (linger 0).
            if round < 2 {
                let seenDeadline = Date().addingTimeInterval(10)
                while Date() < seenDeadline && h.upstream.requestCount < 40 * (round + 1) { usleep(10_000) }
                #expect(h.upstream.requestCount == 40 * (round + 1), "requests forwarded before the clients left")
            }
            for (i, c) in clients.enumerated() where i % 2 == 0 {
                var l = linger(l_onoff: 1, l_linger: 0)
                setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &l, socklen_t(MemoryLayout<linger>.size))
            }
            clients.removeAll()
        }
        let deadline = Date().addingTimeInterval(15)
        var open = "", closeWait = -1
        while Date() < deadline {
            open = try Self.openConnections(h)
            closeWait = Self.closeWaitCount(localPort: h.port)
            if open.hasSuffix(" 0") && closeWait == 0 { break }
            usleep(50_000)
        }
        #expect(open.hasSuffix(" 0"), "\(open)")
        #expect(closeWait == 0, "\(closeWait) gateway sockets in CLOSE-WAIT")
    }

    /// Rapid Reset across reconnects (#3): each connection sends 300 GET streams each reset at once (below nghttp2's
    /// per-connection limit) and goes away; the next connection does the same. No stream reset in the read that
    /// brought it reaches the upstream, and the budget per client address ends a connection with
    /// GOAWAY(ENHANCE_YOUR_CALM) before the tenth reconnect; a client that does not reset is still served.
    @Test func rapidResetAcrossReconnectsDoesNoUpstreamWorkAndIsCutOff() throws {
        let h = try GatewayHarness { GatewayHarness.config(upstream: $0, routes: Self.routes) }
        defer { h.stop() }
        var cutOff: Int?
        for connection in 0..<10 {
            let c = try RawHTTPClient(port: h.port)
            var out = TLSAndHTTP2Tests.preface
            for i in 0..<300 {
                let id = UInt32(2 * i + 1)
                out += TLSAndHTTP2Tests.frame(1, flags: 0x4 | 0x1, stream: id, TLSAndHTTP2Tests.getHeaders)
                out += TLSAndHTTP2Tests.frame(3, stream: id, [0, 0, 0, 8])
            }
            try? c.send(out)
            let frames = TLSAndHTTP2Tests.readFrames(c, timeout: 1)
            if TLSAndHTTP2Tests.goAwayCode(frames) == 0xB {
                cutOff = connection
                break
            }
        }
        #expect(cutOff != nil && cutOff! >= 3, "cut off at reconnect \(String(describing: cutOff)), want after ~1,000 resets")
        #expect(h.upstream.requestCount == 0 && h.upstream.connectionCount == 0,
                "streams reset in the read that opened them reached the upstream: \(h.upstream.connectionCount) connections")
        let metrics = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains(#"gateway_h2_connection_errors_total{reason="rapid_reset_address"} 1"#), "\(metrics.split(separator: "\n").filter { $0.contains("h2_connection_errors") })")

        // A client from the same address that does not reset is served.
        let c = try RawHTTPClient(port: h.port)
        try c.send(TLSAndHTTP2Tests.preface + TLSAndHTTP2Tests.frame(1, flags: 0x4 | 0x1, stream: 1, TLSAndHTTP2Tests.getHeaders))
        let frames = TLSAndHTTP2Tests.readFrames(c, timeout: 2)
        #expect(frames.contains { $0.0 == 1 && $0.2 == 1 }, "a response HEADERS on stream 1: \(frames.map(\.0))")
        #expect(h.upstream.requestCount == 1)
    }

    /// The budget's bookkeeping with a manual clock: per address, process-wide, refilled over time, bounded in size.
    @Test func resetBudgetPerAddressAndGlobal() {
        var limits = ClientResetBudget.Limits()
        limits.perAddressBurst = 5
        limits.perAddressPerSecond = 1
        limits.globalBurst = 8
        limits.globalPerSecond = 1
        limits.maxAddresses = 2
        let budget = ClientResetBudget(limits: limits, now: 0)
        for _ in 0..<5 { #expect(budget.spend(address: "a", now: 0) == nil) }
        #expect(budget.spend(address: "a", now: 0) == "rapid_reset_address")
        #expect(budget.spend(address: "a", now: 1_000_000_000) == nil, "one token back after a second")
        // 8 global tokens + 1 refilled after a second: a took 6 of them (its refused spend took none), b takes 3.
        for _ in 0..<3 { #expect(budget.spend(address: "b", now: 1_000_000_000) == nil) }
        #expect(budget.spend(address: "b", now: 1_000_000_000) == "rapid_reset_global")
        // A third address finds no room (a and b still owe tokens) and is held to the global budget only.
        #expect(budget.spend(address: "c", now: 1_000_000_000) == "rapid_reset_global")
        #expect(budget.trackedAddresses == 2)
        // Much later every bucket is full again: the table forgets them to make room.
        #expect(budget.spend(address: "c", now: 100_000_000_000) == nil)
        #expect(budget.trackedAddresses == 1)
    }

    static func bufferedResponseBytes(_ h: GatewayHarness) throws -> Int {
        let m = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        let line = m.split(separator: "\n").first { $0.hasPrefix("gateway_h2_buffered_response_bytes ") }
        return Int(line?.split(separator: " ").last ?? "") ?? -1
    }

    /// Zero-window streams (#4): a client that announces SETTINGS_INITIAL_WINDOW_SIZE=0 and opens 50 streams of
    /// 10 MB responses makes the gateway hold about its per-connection limit (1 MiB, plus a few upstream reads),
    /// not ~256 KiB per stream; when the client leaves the count returns to 0; a normal client still
    /// downloads over h2c.
    @Test func zeroWindowStreamsBufferABoundedAmount() throws {
        let bulk = try BulkUpstream(bodyBytes: 10_000_000)
        defer { bulk.stop() }
        let h = try GatewayHarness { _ in
            GatewayHarness.config(upstream: bulk.url, routes: Self.routes)
                .replacingOccurrences(of: "response_timeout: 2s", with: "response_timeout: 60s")
        }
        defer { h.stop() }
        let c = try RawHTTPClient(port: h.port)
        let path = Array("/big".utf8)
        let block: [UInt8] = [0x82, 0x86, 0x04, UInt8(path.count)] + path + [0x41, 0x01, UInt8(ascii: "a")]
        var out = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + TLSAndHTTP2Tests.frame(4, [0x00, 0x04, 0, 0, 0, 0])
        for i in 0..<50 { out += TLSAndHTTP2Tests.frame(1, flags: 0x4 | 0x1, stream: UInt32(2 * i + 1), block) }
        try c.send(out)
        var peak = 0
        let until = Date().addingTimeInterval(3)
        while Date() < until {
            peak = max(peak, try Self.bufferedResponseBytes(h))
            usleep(50_000)
        }
        #expect(bulk.connections == 50, "every stream reached the upstream")
        #expect(peak > 1 << 20, "the connection's limit was reached (\(peak) bytes)")
        // Once the connection holds its limit, a new stream reads no body at all (the pause comes right after the
        // response head): the overshoot is a few upstream reads, not one per stream (50 × 64 KiB before).
        #expect(peak <= (1 << 20) + 4 * 64 * 1024, "buffered \(peak) bytes for 50 zero-window streams")
        shutdown(c.fd, Int32(SHUT_RDWR))
        let deadline = Date().addingTimeInterval(10)
        var after = -1
        while Date() < deadline {
            after = try Self.bufferedResponseBytes(h)
            if after == 0 { break }
            usleep(50_000)
        }
        #expect(after == 0, "still buffered after the client left: \(after)")
        print("zero-window: peak \(peak) bytes buffered for 50 streams; \(after) after the client left")

        let curl = try BoundedCommand.run("/usr/bin/curl", ["-s", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                                                         "http://127.0.0.1:\(h.port)/big"], timeout: 60)
        #expect(curl.stdout == "200 10000000", "\(curl.stdout) \(curl.stderr)")
    }

    /// Upstream connects are rate-bounded per pool (#3): with `max_connects_per_second: 2` and no keep-alive
    /// (`max_idle_connections: 0`), the third request within the second is answered 503 `connect_rate_limited` with
    /// `Retry-After` and never reaches the upstream; a second later requests pass again.
    @Test func upstreamConnectsAreRateBounded() throws {
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: Self.routes,
                                  upstreamExtra: "    max_idle_connections: 0\n    max_connects_per_second: 2")
        }
        defer { h.stop() }
        // Ten requests back to back. The bound is a rate, so what passes depends on how long they took on this
        // machine: at most the burst (2) plus what refilled meanwhile; past it every one is refused, never sent.
        var statuses: [Int] = []
        var limited: [TestResponse] = []
        let started = Date()
        for _ in 0..<10 {
            let r = try RawHTTPClient.roundTrip(port: h.port, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
            statuses.append(r.status)
            if r.status == 503 { limited.append(r) }
        }
        let elapsed = Date().timeIntervalSince(started)
        let passed = statuses.filter { $0 == 200 }.count
        #expect(Set(statuses).isSubset(of: [200, 503]), "\(statuses)")
        #expect(passed >= 2 && passed <= 2 + Int((2 * elapsed).rounded(.up)), "\(statuses) in \(elapsed) s")
        if elapsed < 4 { #expect(!limited.isEmpty, "\(statuses) in \(elapsed) s") }
        #expect(limited.allSatisfy { $0.header("retry-after") == "1" && $0.bodyText.contains("connect_rate_limited") },
                "\(limited.map(\.bodyText))")
        #expect(h.upstream.connectionCount == passed)
        usleep(1_100_000)
        #expect(try RawHTTPClient.roundTrip(port: h.port, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n").status == 200)
    }
}
