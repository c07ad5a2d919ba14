import Foundation
import Glibc
import Testing
import TestSupport

/// A stream's one log line (SPEC §6.1, docs/behaviour.md "Long-lived streams"): server-sent events on a route with
/// `stream_idle_timeout`, from a real upstream that sends its events 1.5 s apart behind `response_timeout: 1s`, read
/// by curl; the line written when the stream ends has the status, `duration_ms`, `bytes_in` (the request body from
/// the client) and `bytes_out` (the response body to the client), equal to what was sent.
@Suite struct StreamLogTests {
    static let serverScript = #"""
    import http.server, os, socketserver, sys, time
    port_file = sys.argv[1]

    class Events(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(3):
                time.sleep(1.5)
                self.wfile.write(("data: part%d of a %d-byte request\n\n" % (i, len(body))).encode())
                self.wfile.flush()
            self.close_connection = True
        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    s = Server(("127.0.0.1", 0), Events)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(s.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    s.serve_forever()
    """#

    /// The events the upstream sends for a request body of `n` bytes.
    static func events(_ n: Int) -> String { (0..<3).map { "data: part\($0) of a \(n)-byte request\n\n" }.joined() }

    @Test func serverSentEventsLineHasTheBytesEachWay() throws {
        let dir = NSTemporaryDirectory() + "sse-log-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.serverScript.write(toFile: dir + "/server.py", atomically: true, encoding: .utf8)
        let upstream = Process()
        upstream.executableURL = URL(fileURLWithPath: WebSocketTests.python)
        upstream.arguments = [dir + "/server.py", dir + "/port"]
        upstream.standardOutput = FileHandle.nullDevice
        try upstream.run()
        // SIGKILL: test processes block SIGTERM, and their children inherit the mask.
        defer { kill(upstream.processIdentifier, SIGKILL); upstream.waitUntilExit() }
        var port: UInt16?
        let deadline = Date().addingTimeInterval(10)
        while port == nil && Date() < deadline {
            if FileManager.default.fileExists(atPath: dir + "/port") {
                port = UInt16(try String(contentsOfFile: dir + "/port", encoding: .utf8))
            } else {
                usleep(20_000)
            }
        }
        let upstreamPort = try #require(port, "the Python event server did not start")

        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: events, prefix: /events/, upstream: sse, enforcement: off, stream_idle_timeout: 5s }
            """, appCheck: "  jwks: { url: \(issuer.jwksURL) }", upstreamExtra: """
              sse:
                url: http://127.0.0.1:\(upstreamPort)
                response_timeout: 1s
            """)
        }
        defer { h.stop() }
        try h.waitUntilReady()
        let body = String(repeating: "x", count: 1234)
        try body.write(toFile: dir + "/body", atomically: true, encoding: .utf8)
        let r = try BoundedCommand.run("/usr/bin/curl", [
            "-sN", "--max-time", "30", "-H", "X-Request-Id: sse-log-test", "-H", "Content-Type: text/plain",
            "--data-binary", "@" + dir + "/body", "http://127.0.0.1:\(h.port)/events/feed?x=1",
        ], timeout: 40)
        #expect(r.status == 0, "curl: \(r.status) \(r.stderr)")
        // Every event arrived, although each came later than response_timeout after the one before.
        #expect(r.stdout == Self.events(1234), "\(r.stdout)")

        let line = try #require(WebSocketTests.logLine(h, requestId: "sse-log-test"), "\(h.logLines().suffix(3))")
        #expect(line["route"] as? String == "events")
        #expect(line["path"] as? String == "/events/feed")
        #expect(line["status"] as? Int == 200)
        #expect(line["bytes_in"] as? Int == 1234, "\(line)")
        #expect(line["bytes_out"] as? Int == Self.events(1234).utf8.count, "\(line)")
        // Three gaps of 1.5 s: the line is written when the stream ends, not when its head went out.
        #expect((line["duration_ms"] as? Double ?? 0) >= 4000, "\(line)")
        #expect(line["tunnel_end"] == nil)
        #expect(h.logLines().filter { $0.contains("\"request_id\":\"sse-log-test\"") && $0.contains("\"message\":\"request\"") }.count == 1)
    }
}
