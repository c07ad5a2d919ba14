import AppCheck
import Foundation
import Glibc
@testable import Gateway
@testable import ProxyCore
import Testing
import TestSupport

/// WebSocket tunnels and long-lived streams (SPEC §6.1) end to end, with clients and servers nobody here wrote:
/// Python's `websockets` (Debian's python3-websockets, `make deps-test`) as the upstream server and as the client,
/// a Python `http.server` sending server-sent events and `curl` reading them.
@Suite(.serialized) struct WebSocketTests {
    // MARK: the Python side

    static let serverScript = #"""
    import asyncio, http, http.server, json, socketserver, sys, time
    mode, port_file = sys.argv[1], sys.argv[2]

    def ready(port):
        with open(port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.rename(port_file + ".tmp", port_file)

    if mode == "sse":
        class Events(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for i in range(3):
                    time.sleep(1.5)
                    self.wfile.write(("data: part%d\n\n" % i).encode())
                    self.wfile.flush()
                self.close_connection = True
            def log_message(self, *args):
                pass
        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
        s = Server(("127.0.0.1", 0), Events)
        ready(s.server_address[1])
        s.serve_forever()
        sys.exit(0)

    import websockets
    log_file, sent_file = sys.argv[3], sys.argv[4]

    def process_request(path, headers):
        with open(log_file, "a") as f:
            f.write(json.dumps({"path": path, "headers": [[k, v] for k, v in headers.raw_items()]}) + "\n")
        if path.startswith("/ws/deny"):
            return (http.HTTPStatus.FORBIDDEN, [("Content-Type", "text/plain")], b"denied\n")
        return None

    async def handler(ws):
        path = ws.path
        if path.startswith("/ws/flood"):
            chunk, total = b"x" * 65536, 0
            try:
                while True:
                    await ws.send(chunk)
                    total += len(chunk)
                    with open(sent_file, "w") as f:
                        f.write(str(total))
            except Exception:
                return
        if path.startswith("/ws/close"):
            await ws.send("bye")
            await ws.close()
            return
        try:
            async for message in ws:
                await ws.send(message)
        except Exception:
            pass

    async def main():
        async with websockets.serve(handler, "127.0.0.1", 0, subprotocols=["chat"], process_request=process_request,
                                    ping_interval=None, max_size=None) as server:
            ready(server.sockets[0].getsockname()[1])
            await asyncio.Future()

    asyncio.run(main())
    """#

    static let clientScript = #"""
    import asyncio, json, os, sys, time, websockets
    url, mode, token, protocols = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

    async def main():
        out = {}
        headers = {"X-Firebase-AppCheck": token} if token else {}
        try:
            async with websockets.connect(url, extra_headers=headers, subprotocols=protocols.split(",") if protocols else None,
                                          ping_interval=None, open_timeout=10, close_timeout=5, max_size=None) as ws:
                out["status"] = 101
                out["subprotocol"] = ws.subprotocol
                out["request_id"] = ws.response_headers.get("X-Request-Id")
                if mode == "echo":
                    await ws.send("hello")
                    out["text"] = await ws.recv()
                    await ws.send(b"\x00\x01\x02binary")
                    out["binary"] = (await ws.recv()).hex()
                    await ws.send(os.urandom(1000000))  # random: permessage-deflate cannot shrink it
                    out["big"] = len(await ws.recv())
                elif mode == "serverclose":
                    out["text"] = await ws.recv()
                    try:
                        await asyncio.wait_for(ws.recv(), 10)
                    except websockets.exceptions.ConnectionClosed as e:
                        out["close_code"] = e.code
                elif mode == "idle":
                    start = time.monotonic()
                    try:
                        await asyncio.wait_for(ws.recv(), 20)
                        out["closed"] = False
                    except websockets.exceptions.ConnectionClosed:
                        out["closed"] = True
                    out["seconds"] = time.monotonic() - start
        except websockets.exceptions.InvalidStatusCode as e:
            out["status"] = e.status_code
        print(json.dumps(out))

    asyncio.run(main())
    """#

    static let python = "/usr/bin/python3"

    /// The Python upstream (`ws` or `sse`), its request log and, for the flood, the bytes it managed to send.
    final class PythonUpstream: @unchecked Sendable {
        let directory: String
        let process = Process()
        let port: UInt16

        init(_ mode: String) throws {
            directory = NSTemporaryDirectory() + "ws-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try WebSocketTests.serverScript.write(toFile: directory + "/server.py", atomically: true, encoding: .utf8)
            try WebSocketTests.clientScript.write(toFile: directory + "/client.py", atomically: true, encoding: .utf8)
            process.executableURL = URL(fileURLWithPath: WebSocketTests.python)
            process.arguments = [directory + "/server.py", mode, directory + "/port", directory + "/requests.log",
                                 directory + "/sent"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            let deadline = Date().addingTimeInterval(10)
            var found: UInt16?
            while Date() < deadline {
                if let text = try? String(contentsOfFile: directory + "/port", encoding: .utf8), let p = UInt16(text) {
                    found = p
                    break
                }
                usleep(20_000)
            }
            guard let found else {
                // SIGKILL: test processes block SIGTERM, and their children inherit the mask.
                kill(process.processIdentifier, SIGKILL)
                throw HarnessError("the Python \(mode) server did not start (python3-websockets installed? make deps-test)")
            }
            port = found
        }

        var url: String { "http://127.0.0.1:\(port)" }

        /// The handshakes the upstream received: path and header list.
        var requests: [(path: String, headers: [(String, String)])] {
            LogFile.completeLines(directory + "/requests.log").compactMap { line in
                guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      let path = obj["path"] as? String, let list = obj["headers"] as? [[String]] else { return nil }
                return (path, list.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil })
            }
        }

        /// The bytes the flood handler reports sent; nil until it has written a count (no file yet, or read between
        /// its truncate and its write). A count that is not a number is an error.
        func sentBytes() throws -> Int? {
            let path = directory + "/sent"
            guard FileManager.default.fileExists(atPath: path) else { return nil }
            let text = try String(contentsOfFile: path, encoding: .utf8)
            if text.isEmpty { return nil }
            guard let n = Int(text) else { throw HarnessError("the flood handler wrote \(text)") }
            return n
        }

        /// Runs the `websockets` client against the gateway; its JSON answer.
        func client(_ port: UInt16, _ path: String, mode: String = "echo", token: String? = nil,
                    protocols: [String] = [], timeout: Double = 40) throws -> [String: Any] {
            let r = try BoundedCommand.run(WebSocketTests.python, [
                directory + "/client.py", "ws://127.0.0.1:\(port)\(path)", mode, token ?? "", protocols.joined(separator: ","),
            ], timeout: timeout)
            guard let line = r.stdout.split(separator: "\n").last,
                  let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw HarnessError("websockets client: \(r.status) \(r.stdout) \(r.stderr)")
            }
            return obj
        }

        func stop() {
            // SIGKILL: test processes block SIGTERM, and their children inherit the mask.
            if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    static func harness(_ issuer: LocalIssuer, _ ws: PythonUpstream, extraRoutes: String = "",
                        upstreamExtra: String = "", limits: [String: String] = [:]) throws -> GatewayHarness {
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: chat, prefix: /ws/, upstream: ws, enforcement: enforce, websocket: true }
              - { name: once, prefix: /once/, upstream: ws, enforcement: enforce, replay_protection: true, websocket: true }
              - { name: quiet, prefix: /quiet/, upstream: ws, enforcement: off, websocket: true, stream_idle_timeout: 1s }
              - { name: plain, prefix: /plain/, upstream: ws, enforcement: off }
            \(extraRoutes)
            """, limits: limits, appCheck: """
              project_id: "\(AppCheckEndToEndTests.projectId)"
              clock_skew: 0s
              jwks:
                url: \(issuer.jwksURL)
            """, upstreamExtra: """
              ws:
                url: \(ws.url)
                response_timeout: 5s
            \(upstreamExtra)
            """)
        }
        try h.waitUntilReady()
        // The memory replay store refuses limited-use tokens minted before it came up (docs/replay.md).
        ReplayE2E.waitForNextSecond()
        return h
    }

    /// The access-log line of the request with this id (waited for: lines are written in batches).
    static func logLine(_ h: GatewayHarness, requestId: String) -> [String: Any]? {
        guard h.logged("\"request_id\":\"\(requestId)\"", timeout: 10) else { return nil }
        for line in h.logLines() where line.contains("\"request_id\":\"\(requestId)\"") && line.contains("\"message\":\"request\"") {
            return try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
        return nil
    }

    static func header(_ list: [(String, String)], _ name: String) -> [String] {
        list.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }

    // MARK: tests

    /// Token in the header: the handshake is checked, forwarded with `Connection`/`Upgrade` kept and the token
    /// removed, then text, binary and a 1 MB message echo both ways; the client closes; one log line with 101 and
    /// the bytes each way.
    @Test func headerTokenEchoesBothWaysAndLogsOnce() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let h = try Self.harness(issuer, ws)
        defer { h.stop() }
        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)
        let r = try ws.client(h.port, "/ws/echo", token: token)
        #expect(r["status"] as? Int == 101, "\(r)")
        #expect(r["text"] as? String == "hello")
        #expect(r["binary"] as? String == "000102" + Array("binary".utf8).map { String(format: "%02x", $0) }.joined())
        #expect(r["big"] as? Int == 1_000_000)
        let seen = try #require(ws.requests.last)
        #expect(seen.path == "/ws/echo")
        #expect(Self.header(seen.headers, "upgrade") == ["websocket"])
        #expect(Self.header(seen.headers, "connection").first?.lowercased() == "upgrade")
        #expect(Self.header(seen.headers, "x-appcheck-status") == ["verified"])
        #expect(Self.header(seen.headers, "x-firebase-appcheck").isEmpty)
        let id = try #require(r["request_id"] as? String)
        let line = try #require(Self.logLine(h, requestId: id))
        #expect(line["status"] as? Int == 101)
        #expect(line["outcome"] as? String == "verified")
        #expect((line["bytes_in"] as? Int ?? 0) > 1_000_000)
        #expect((line["bytes_out"] as? Int ?? 0) > 1_000_000)
        #expect(line["tunnel_end"] as? String == "closed")
        #expect(line["duration_ms"] != nil)
    }

    /// A browser's token as a subprotocol entry: read (no header), removed before forwarding (the upstream sees only
    /// the real subprotocol, and picks it), never logged.
    @Test func subprotocolTokenIsReadAndNeverForwarded() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let h = try Self.harness(issuer, ws)
        defer { h.stop() }
        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)
        let r = try ws.client(h.port, "/ws/echo", protocols: ["X-Firebase-AppCheck.\(token)", "chat"])
        #expect(r["status"] as? Int == 101, "\(r)")
        #expect(r["subprotocol"] as? String == "chat")
        #expect(r["text"] as? String == "hello")
        let seen = try #require(ws.requests.last)
        #expect(Self.header(seen.headers, "sec-websocket-protocol") == ["chat"])
        #expect(!seen.headers.contains { $0.1.contains(token) || $0.1.lowercased().contains("x-firebase-appcheck") })
        #expect(Self.header(seen.headers, "x-appcheck-status") == ["verified"])
        let id = try #require(r["request_id"] as? String)
        #expect(Self.logLine(h, requestId: id)?["status"] as? Int == 101)
        #expect(!h.logLines().contains { $0.contains(token) })
        // With the header present, the entry is not read (a bad one does not matter) but still removed.
        let both = try ws.client(h.port, "/ws/echo", token: token, protocols: ["x-firebase-appcheck.garbage", "chat"])
        #expect(both["status"] as? Int == 101, "\(both)")
        #expect(try #require(ws.requests.last).headers.allSatisfy { !$0.1.contains("garbage") })
        // A wrong token in the entry is refused like a wrong header.
        let bad = try ws.client(h.port, "/ws/echo", protocols: ["x-firebase-appcheck.not-a-token", "chat"])
        #expect(bad["status"] as? Int == 401)
    }

    /// A handshake refused by App Check never reaches the upstream; a limited-use token opens one tunnel only.
    @Test func refusedHandshakesNeverReachTheUpstreamAndLimitedUseIsOnce() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let h = try Self.harness(issuer, ws)
        defer { h.stop() }
        let missing = try ws.client(h.port, "/ws/echo")
        #expect(missing["status"] as? Int == 401)
        #expect(ws.requests.isEmpty, "a refused handshake never reaches the upstream")

        let limited = try issuer.mint(appId: AppCheckEndToEndTests.appId, ttl: 300, jti: UUID().uuidString)
        let first = try ws.client(h.port, "/once/echo", token: limited)
        #expect(first["status"] as? Int == 101, "\(first)")
        #expect(first["text"] as? String == "hello")
        let again = try ws.client(h.port, "/once/echo", token: limited)
        #expect(again["status"] as? Int == 401, "\(again)")
        #expect(ws.requests.count == 1, "only the first handshake reached the upstream")
    }

    /// The upstream closes first: its close frame and FIN reach the client; an answer other than 101 is relayed as a
    /// response; on a route without `websocket: true` the upstream sees a plain GET (its 426 is relayed).
    @Test func serverCloseNon101AndPlainRoutes() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let h = try Self.harness(issuer, ws)
        defer { h.stop() }
        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)

        let closed = try ws.client(h.port, "/ws/close", mode: "serverclose", token: token)
        #expect(closed["text"] as? String == "bye")
        #expect(closed["close_code"] as? Int == 1000, "\(closed)")
        let id = try #require(closed["request_id"] as? String)
        #expect(Self.logLine(h, requestId: id)?["tunnel_end"] as? String == "closed")

        let denied = try ws.client(h.port, "/ws/deny", token: token)
        #expect(denied["status"] as? Int == 403)

        let plain = try ws.client(h.port, "/plain/echo")
        #expect(plain["status"] as? Int == 426, "\(plain)")
        let seen = try #require(ws.requests.last)
        #expect(seen.path == "/plain/echo")
        #expect(Self.header(seen.headers, "upgrade").isEmpty)
        #expect(Self.header(seen.headers, "connection").isEmpty)
    }

    /// `stream_idle_timeout` closes a tunnel where no byte moved either way; logged `idle_timeout`.
    @Test func idleTunnelIsClosed() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let h = try Self.harness(issuer, ws)
        defer { h.stop() }
        let r = try ws.client(h.port, "/quiet/echo", mode: "idle")
        #expect(r["status"] as? Int == 101)
        #expect(r["closed"] as? Bool == true, "\(r)")
        let id = try #require(r["request_id"] as? String)
        #expect(Self.logLine(h, requestId: id)?["tunnel_end"] as? String == "idle_timeout")
    }

    /// Server-sent events whose parts are 1.5 s apart, behind an upstream with `response_timeout: 1s`: on a route
    /// with `stream_idle_timeout` every part arrives; on one without, the stream is cut after its head.
    @Test func serverSentEventsSlowerThanResponseTimeout() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let sse = try PythonUpstream("sse")
        defer { sse.stop() }
        let h = try Self.harness(issuer, ws, extraRoutes: """
              - { name: events, prefix: /events/, upstream: sse, enforcement: off, stream_idle_timeout: 5s }
              - { name: short, prefix: /short/, upstream: sse, enforcement: off }
            """, upstreamExtra: """
              sse:
                url: \(sse.url)
                response_timeout: 1s
            """)
        defer { h.stop() }
        let r = try BoundedCommand.run("/usr/bin/curl", ["-sN", "--max-time", "20", "http://127.0.0.1:\(h.port)/events/x"],
                                       timeout: 30)
        #expect(r.stdout.contains("data: part0") && r.stdout.contains("data: part1") && r.stdout.contains("data: part2"),
                "\(r.stdout)")
        let cut = try BoundedCommand.run("/usr/bin/curl", ["-sN", "--max-time", "20", "http://127.0.0.1:\(h.port)/short/x"],
                                         timeout: 30)
        #expect(!cut.stdout.contains("data: part2"), "without stream_idle_timeout the body gap is response_timeout")
    }

    /// A client that never reads while the upstream floods: the gateway stops reading the upstream (which then
    /// cannot send), and its buffers stay bounded. Its own process, so its figures are its own.
    @Test func floodToAClientThatNeverReadsStaysBounded() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let dir = NSTemporaryDirectory() + "ws-flood-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = dir + "/gateway.yaml"
        try """
        server:
          listen: ["127.0.0.1:0"]
          admin_listen: "127.0.0.1:0"
          threads: 1
        app_check:
          project_number: "123456789012"
          jwks: { url: "\(issuer.jwksURL)" }
        upstreams:
          ws: { url: "\(ws.url)" }
        routes:
          - { name: flood, prefix: /, upstream: ws, enforcement: off, websocket: true }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let gw = try GatewayProcess.serve(config: config)
        defer { gw.signal(SIGKILL); _ = gw.waitForExit(timeout: 5) }
        let rssBefore = Self.rssKiB(gw.process.processIdentifier)

        let (fd, head) = try Self.rawHandshake(port: gw.port, path: "/ws/flood")
        defer { Glibc.close(fd) }
        #expect(head.hasPrefix("HTTP/1.1 101 "), "\(head)")

        // Wait until the upstream can send no more (its count stops growing), at most 30 s.
        var last = -1
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            usleep(500_000)
            guard let now = try ws.sentBytes() else { continue }
            if now == last && now > 0 { break }
            last = now
        }
        let sent = try #require(try ws.sentBytes(), "the flood handler reported what it sent")
        let metrics = try RawHTTPClient.roundTrip(port: gw.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        let ioLine = metrics.split(separator: "\n").first { $0.hasPrefix("gateway_buffer_bytes{kind=\"io\"}") }
        let ioBytes = Int(ioLine?.split(separator: " ").last ?? "") ?? -1
        let rssAfter = Self.rssKiB(gw.process.processIdentifier)
        // Without backpressure loopback carries gigabytes in these seconds; with it, the kernel's socket buffers
        // and the gateway's 256 KiB per direction hold everything the upstream could send.
        #expect(sent > 0 && sent < 64 << 20, "upstream sent \(sent) bytes to a client that never reads")
        #expect(ioBytes >= 0 && ioBytes <= 1 << 20, "gateway io buffers: \(ioBytes)")
        #expect(rssAfter - rssBefore < 32 * 1024, "RSS grew from \(rssBefore) KiB to \(rssAfter) KiB")
        #expect(metrics.contains("gateway_connections{state=\"tunnel\"} 1"))
    }

    /// A handshake over a plain socket; returns the socket (the 101 head read, nothing after it) and the head.
    static func rawHandshake(port: UInt16, path: String, extra: String = "") throws -> (Int32, String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw HarnessError("connect failed")
        }
        var tv = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let hello = "GET \(path) HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(extra)\r\n"
        _ = hello.withCString { send(fd, $0, strlen($0), 0) }
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while head.count < 4096, recv(fd, &byte, 1, 0) == 1 {
            head.append(byte)
            if head.suffix(4) == [13, 10, 13, 10] { break }
        }
        return (fd, String(decoding: head, as: UTF8.self))
    }

    /// A WebSocket handshake goes through the same App Check step as any request, DPoP included (SPEC §4.4): a token
    /// bound to a key opens a tunnel only with a fresh proof of that key for this handshake (`htm` GET, `htu` the
    /// handshake's URL); without one it is 401 `dpop_missing` and never reaches the upstream.
    @Test func boundTokenOpensATunnelOnlyWithItsProof() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let h = try Self.harness(issuer, ws)
        defer { h.stop() }
        let key = try #require(DPoPPrivateKey.generate())
        let token = try DPoPEndToEndTests.token(issuer, boundTo: key)
        let before = ws.requests.count
        let (bare, refused) = try Self.rawHandshake(port: h.port, path: "/ws/echo", extra: "X-Firebase-AppCheck: \(token)\r\n")
        Glibc.close(bare)
        #expect(refused.hasPrefix("HTTP/1.1 401"), "\(refused)")
        #expect(refused.lowercased().contains("www-authenticate: dpop error=\"invalid_dpop_proof\""), "\(refused)")
        #expect(ws.requests.count == before, "a refused handshake never reaches the upstream")
        let proof = try DPoPEndToEndTests.proof(key, htu: "http://a/ws/echo", token: token)
        let (fd, opened) = try Self.rawHandshake(port: h.port, path: "/ws/echo",
                                                 extra: "X-Firebase-AppCheck: \(token)\r\nDPoP: \(proof)\r\n")
        Glibc.close(fd)
        #expect(opened.hasPrefix("HTTP/1.1 101"), "\(opened)")
        #expect(Self.header(try #require(ws.requests.last).headers, "dpop").isEmpty, "the proof is not forwarded")
    }

    /// A tunnel counts as a connection, not as an upstream request: once upgraded it gives back its count under
    /// `max_upstream_requests_per_address`, so more tunnels than that bound stay open at once from one address, and
    /// a plain request still reaches the upstream beside them.
    @Test func openTunnelsDoNotHoldThePerAddressUpstreamBound() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let h = try Self.harness(issuer, ws, extraRoutes: "  - { name: open, prefix: /open/, upstream: ws, enforcement: off, websocket: true }",
                                 limits: ["max_upstream_requests_per_address": "2"])
        defer { h.stop() }
        var open: [Int32] = []
        defer { for fd in open { Glibc.close(fd) } }
        for i in 0..<4 {
            let (fd, head) = try Self.rawHandshake(port: h.port, path: "/open/hold")
            open.append(fd)
            #expect(head.hasPrefix("HTTP/1.1 101"), "tunnel \(i): \(head)")
        }
        let (fd, head) = try Self.rawHandshake(port: h.port, path: "/open/hold")
        open.append(fd)
        #expect(head.hasPrefix("HTTP/1.1 101"), "a fifth tunnel beside four open ones: \(head)")
    }

    /// `SIGTERM`: a tunnel is closed at the end of `shutdown_grace` (both sides), logged `shutdown`, and the process
    /// exits 0.
    @Test func sigtermClosesTunnelsAtTheEndOfTheGrace() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try PythonUpstream("ws")
        defer { ws.stop() }
        let dir = NSTemporaryDirectory() + "ws-term-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let config = dir + "/gateway.yaml"
        try """
        server:
          listen: ["127.0.0.1:0"]
          admin_listen: "127.0.0.1:0"
          threads: 1
          limits:
            shutdown_grace: 1s
        app_check:
          project_number: "123456789012"
          jwks: { url: "\(issuer.jwksURL)" }
        upstreams:
          ws: { url: "\(ws.url)" }
        routes:
          - { name: live, prefix: /, upstream: ws, enforcement: off, websocket: true }
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let gw = try GatewayProcess.serve(config: config)
        defer { gw.signal(SIGKILL); _ = gw.waitForExit(timeout: 5) }
        let (fd, head) = try Self.rawHandshake(port: gw.port, path: "/ws/echo")
        defer { Glibc.close(fd) }
        #expect(head.hasPrefix("HTTP/1.1 101 "), "\(head)")
        #expect(head.contains("X-Request-Id: "))
        gw.signal(SIGTERM)
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, 0)
        #expect(n <= 0, "the tunnel is closed at the end of the grace")
        #expect(gw.waitForExit(timeout: 15) == 0)
        #expect(gw.lines.contains { $0.contains("\"status\":101") && $0.contains("\"tunnel_end\":\"shutdown\"") },
                "\(gw.lines.suffix(5))")
    }

    static func rssKiB(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}

/// The tunnel's rules as a value (`TunnelState`), without a loop.
@Suite struct TunnelStateTests {
    @Test func roomPausesAndDrainResumes() {
        var s = TunnelState(now: 0, idleTimeout: 10, highWater: 100, lowWater: 20)
        let some = s.room(from: .client, buffered: 40)
        #expect(some == 60)
        let none = s.room(from: .client, buffered: 100)
        #expect(none == 0)
        #expect(s.flow(from: .client) == .open(paused: true))
        #expect(s.flow(from: .upstream) == .open(paused: false), "the other direction is not affected")
        let early = s.drained(towards: .upstream, buffered: 50)
        #expect(!early, "above the low-water mark it stays paused")
        let resumed = s.drained(towards: .upstream, buffered: 20)
        #expect(resumed)
        #expect(s.flow(from: .client) == .open(paused: false))
        let twice = s.drained(towards: .upstream, buffered: 0)
        #expect(!twice, "resumed once")
    }

    @Test func halfClosesEachWayThenClosed() {
        var s = TunnelState(now: 0, idleTimeout: 10)
        s.ended(from: .upstream)
        #expect(s.flow(from: .upstream) == .ending)
        #expect(!s.shouldShut(from: .upstream, buffered: 5), "buffered bytes go out first")
        #expect(s.shouldShut(from: .upstream, buffered: 0))
        let bothAfterOne = s.shut(from: .upstream)
        #expect(!bothAfterOne)
        let endedRoom = s.room(from: .upstream, buffered: 0)
        #expect(endedRoom == 0, "an ended side is not read")
        let clientRoom = s.room(from: .client, buffered: 0)
        #expect(clientRoom > 0, "the client may still send")
        s.ended(from: .client)
        let both = s.shut(from: .client)
        #expect(both)
        #expect(s.outcome == nil, "the caller ends it")
        let ended = s.end(.closed)
        #expect(ended)
        #expect(s.outcome == .closed)
        let again = s.end(.shutdown)
        #expect(!again, "ended once")
    }

    @Test func idleBoundCountsBytesEitherWay() {
        var s = TunnelState(now: 0, idleTimeout: 10)
        s.moved(from: .client, 3, now: 4)
        #expect(s.bytesIn == 3)
        let first = s.timerFired(now: 10)
        #expect(first == .reschedule(14))
        s.moved(from: .upstream, 7, now: 12)
        #expect(s.bytesOut == 7)
        s.wrote(now: 13)
        let second = s.timerFired(now: 14)
        #expect(second == .reschedule(23))
        let third = s.timerFired(now: 23)
        #expect(third == .expired)
        #expect(s.outcome == .idleTimeout)
        let late = s.timerFired(now: 40)
        #expect(late == TunnelState.Timer.none)
    }
    /// A side's hang-up (its FIN, HUP or an error reported as an event, before the tunnel or during it) × the read that
    /// follows: a short read empties a plain socket (no second read), except over TLS or once the peer hung up.
    struct PeerRow: CustomTestStringConvertible, Sendable {
        let before: TunnelState.PeerStream
        let hangUp: Bool
        let read: Int
        let tls: Bool
        let emptied: Bool
        var testDescription: String { "\(before) hangUp:\(hangUp) read:\(read)/10 tls:\(tls) → emptied:\(emptied)" }
    }

    static let peerRows: [PeerRow] = [
        PeerRow(before: .open, hangUp: false, read: 4, tls: false, emptied: true),
        PeerRow(before: .open, hangUp: false, read: 10, tls: false, emptied: false),
        PeerRow(before: .open, hangUp: false, read: 4, tls: true, emptied: false),
        PeerRow(before: .open, hangUp: true, read: 4, tls: false, emptied: false),
        PeerRow(before: .open, hangUp: true, read: 10, tls: false, emptied: false),
        PeerRow(before: .ended, hangUp: false, read: 4, tls: false, emptied: false),
        PeerRow(before: .ended, hangUp: true, read: 4, tls: false, emptied: false),
        PeerRow(before: .ended, hangUp: false, read: 4, tls: true, emptied: false),
    ]

    @Test(arguments: peerRows)
    func hangUpIsReadUntilEmpty(_ row: PeerRow) {
        for side in [TunnelState.Side.client, .upstream] {
            var s = TunnelState(now: 0, idleTimeout: 10, clientPeer: side == .client ? row.before : .open,
                                upstreamPeer: side == .upstream ? row.before : .open)
            if row.hangUp { s.hungUp(side) }
            #expect(s.peer(side) == (row.hangUp ? .ended : row.before))
            #expect(s.peer(side.other) == .open, "the other side is not affected")
            #expect(s.readEmptied(from: side, read: row.read, asked: 10, tls: row.tls) == row.emptied, "\(side)")
            #expect(s.flow(from: side) == .open(paused: false), "a hang-up alone does not end the direction")
        }
    }
}
