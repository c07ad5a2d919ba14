import Foundation
import Glibc
@testable import Gateway
import Testing
import TestSupport

/// HTTP/2 upstreams (`protocol: h2`) and trailers (SPEC §6.1) end to end, with peers nobody here wrote: a hyper-h2
/// upstream (`H2Peers.upstream`), hyper-h2 and curl as HTTP/2 clients, curl as the HTTP/1.1 client, h2load for load.
@Suite(.serialized) struct H2UpstreamTests {
    static let python = "/usr/bin/python3"

    /// The hyper-h2 upstream and its event log (one JSON object per line).
    final class Upstream: @unchecked Sendable {
        let directory: String
        let process = Process()
        let port: UInt16

        init(_ options: [String: Any] = [:]) throws {
            directory = NSTemporaryDirectory() + "h2up-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try H2Peers.upstream.write(toFile: directory + "/server.py", atomically: true, encoding: .utf8)
            try H2Peers.client.write(toFile: directory + "/client.py", atomically: true, encoding: .utf8)
            guard FileManager.default.createFile(atPath: directory + "/events.log", contents: nil) else {
                throw POSIXError(.EIO)
            }
            let json = String(decoding: try JSONSerialization.data(withJSONObject: options), as: UTF8.self)
            process.executableURL = URL(fileURLWithPath: H2UpstreamTests.python)
            process.arguments = [directory + "/server.py", directory + "/port", directory + "/events.log", json]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            let deadline = Date().addingTimeInterval(10)
            var found: UInt16?
            while Date() < deadline, found == nil {
                if FileManager.default.fileExists(atPath: directory + "/port") {
                    found = UInt16(try String(contentsOfFile: directory + "/port", encoding: .utf8))
                } else {
                    usleep(20_000)
                }
            }
            guard let found else {
                kill(process.processIdentifier, SIGKILL)
                throw HarnessError("the hyper-h2 upstream did not start (python3-h2 installed? make deps-test)")
            }
            port = found
        }

        /// Every event logged so far.
        func events() throws -> [[String: Any]] {
            try LogFile.completeLines(directory + "/events.log").map { line in
                guard let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    throw HarnessError("not a JSON object: \(line)")
                }
                return obj
            }
        }

        func events(_ kind: String) throws -> [[String: Any]] { try events().filter { $0["event"] as? String == kind } }

        /// Waits (bounded) until `count` events of `kind` were logged; returns them.
        func waitFor(_ kind: String, count: Int = 1, timeout: Double = 10) throws -> [[String: Any]] {
            let deadline = Date().addingTimeInterval(timeout)
            while true {
                let found = try events(kind)
                if found.count >= count || Date() >= deadline { return found }
                usleep(20_000)
            }
        }

        /// The header list of the one request logged for `path`.
        func request(_ path: String) throws -> [(String, String)] {
            let found = try waitFor("request").filter { $0["path"] as? String == path }
            guard found.count == 1, let list = found[0]["headers"] as? [[String]] else {
                throw HarnessError("expected one request for \(path), got \(found)")
            }
            return list.map { ($0[0], $0[1]) }
        }

        func client(_ gatewayPort: UInt16, _ mode: String) throws -> [String: Any] {
            let r = try BoundedCommand.run(H2UpstreamTests.python, [
                directory + "/client.py", String(gatewayPort), mode, directory + "/events.log",
            ], timeout: 30)
            guard let line = r.stdout.split(separator: "\n").last,
                  let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw HarnessError("h2 client: \(r.status) \(r.stdout) \(r.stderr)")
            }
            return obj
        }

        func stop() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    static func harness(_ up: Upstream, scheme: String = "http", extra: String = "") throws -> GatewayHarness {
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: h2, prefix: /, upstream: h2, enforcement: off }
            """, upstreamExtra: """
              h2:
                url: \(scheme)://127.0.0.1:\(up.port)
                protocol: h2
                connect_timeout: 2s
                response_timeout: 3s
            \(extra)
            """)
        }
        return h
    }

    /// curl's answer: status, the header dump (trailers after the head) and the body.
    static func curl(_ args: [String]) throws -> (status: Int, dump: String, body: String) {
        let dir = NSTemporaryDirectory() + "curl-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try BoundedCommand.run("/usr/bin/curl", ["-sS", "--max-time", "20", "-D", dir + "/dump", "-o", dir + "/body",
                                                          "-w", "%{http_code}"] + args, timeout: 30)
        guard let status = Int(r.stdout) else { throw HarnessError("curl: \(r.status) \(r.stdout) \(r.stderr)") }
        return (status, try String(contentsOfFile: dir + "/dump", encoding: .utf8).lowercased(),
                try String(contentsOfFile: dir + "/body", encoding: .utf8))
    }

    static func values(_ list: [(String, String)], _ name: String) -> [String] {
        list.filter { $0.0 == name }.map(\.1)
    }

    // MARK: forwarding and trailers

    /// An HTTP/1.1 client that sent `TE: trailers` reaches an h2c upstream: the body both ways, `te: trailers` and
    /// `:authority` upstream, the response trailers as chunked trailers (minus a forbidden one).
    @Test func http1ClientWithTETrailersGetsChunkedTrailers() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try Self.harness(up)
        defer { h.stop() }
        let r = try Self.curl(["--http1.1", "-H", "TE: trailers", "--data-binary", "hello",
                               "http://127.0.0.1:\(h.port)/echo?trailers=1"])
        #expect(r.status == 200)
        #expect(r.body == "hello")
        #expect(r.dump.contains("transfer-encoding: chunked"))
        #expect(r.dump.contains("grpc-status: 0"))
        #expect(r.dump.contains("x-trailer: done"))
        #expect(!r.dump.contains("forbidden=1"), "set-cookie is not a trailer the gateway passes on")
        let seen = try up.request("/echo?trailers=1")
        #expect(Self.values(seen, "te") == ["trailers"])
        #expect(Self.values(seen, ":authority") == ["127.0.0.1:\(h.port)"])
        #expect(Self.values(seen, ":method") == ["POST"])
        #expect(Self.values(seen, "x-appcheck-status") == ["skipped"])
        #expect(Self.values(seen, "transfer-encoding").isEmpty && Self.values(seen, "connection").isEmpty)
    }

    /// Without `TE: trailers` an HTTP/1.1 client gets no trailers, and other TE values are not forwarded.
    @Test func http1ClientWithoutTETrailersGetsNone() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try Self.harness(up)
        defer { h.stop() }
        let r = try Self.curl(["--http1.1", "-H", "TE: gzip", "http://127.0.0.1:\(h.port)/echo?trailers=1"])
        #expect(r.status == 200)
        #expect(r.body == "echo")
        #expect(!r.dump.contains("grpc-status"))
        #expect(Self.values(try up.request("/echo?trailers=1"), "te").isEmpty)
        let mixed = try Self.curl(["--http1.1", "-H", "TE: gzip, trailers;q=0.5", "http://127.0.0.1:\(h.port)/echo?trailers=1&m"])
        #expect(mixed.status == 200)
        #expect(mixed.dump.contains("grpc-status: 0"))
        #expect(Self.values(try up.request("/echo?trailers=1&m"), "te") == ["trailers"])
    }

    /// An HTTP/2 client (curl, h2c) gets the upstream's trailers as a trailing HEADERS frame.
    @Test func http2ClientGetsTrailingHeaders() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try Self.harness(up)
        defer { h.stop() }
        let r = try Self.curl(["--http2-prior-knowledge", "--data-binary", "abc", "http://127.0.0.1:\(h.port)/echo?trailers=1"])
        #expect(r.status == 200)
        #expect(r.body == "abc")
        #expect(r.dump.contains("x-trailer: done"))
        #expect(r.dump.contains("grpc-status: 0"))
        #expect(!r.dump.contains("forbidden=1"))
    }

    /// Request trailers from an HTTP/2 client reach the h2 upstream (a forbidden one removed), and the response's come
    /// back, read by hyper-h2 on both ends.
    @Test func http2RequestTrailersAreForwarded() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try Self.harness(up)
        defer { h.stop() }
        let r = try up.client(h.port, "trailers")
        let headers = try #require(r["headers"] as? [[String]])
        #expect(headers.contains([":status", "200"]))
        #expect(r["body"] as? String == "ping")
        let trailers = try #require(r["trailers"] as? [[String]])
        #expect(trailers.contains(["x-trailer", "done"]))
        let event = try #require(try up.waitFor("request").first)
        let forwarded = try #require(event["trailers"] as? [[String]])
        #expect(forwarded == [["x-req-trailer", "yes"]])
    }

    /// Chunked trailers from an HTTP/1.1 client reach the h2 upstream as a trailing HEADERS frame (a forbidden one
    /// removed).
    @Test func http1RequestTrailersAreForwarded() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try Self.harness(up)
        defer { h.stop() }
        let r = try RawHTTPClient.roundTrip(port: h.port, """
            POST /echo HTTP/1.1\r
            Host: a\r
            Transfer-Encoding: chunked\r
            \r
            4\r
            ping\r
            0\r
            X-Req-Trailer:  yes \r
            X-AppCheck-Status: forged\r
            \r

            """)
        #expect(r.status == 200)
        #expect(r.bodyText == "ping")
        let event = try #require(try up.waitFor("request").first)
        #expect(event["body"] as? Int == 4)
        #expect(event["trailers"] as? [[String]] == [["x-req-trailer", "yes"]])
    }

    // MARK: failures

    /// A stream the upstream resets, and a response head over the limit, are 502; the connection carries on.
    @Test func resetAndOversizedHeadAre502() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try Self.harness(up)
        defer { h.stop() }
        let reset = try RawHTTPClient.roundTrip(port: h.port, "GET /reset HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(reset.status == 502)
        #expect(reset.bodyText.contains("connection_reset"))
        let big = try RawHTTPClient.roundTrip(port: h.port, "GET /manyheaders HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(big.status == 502)
        #expect(big.bodyText.contains("bad_response"))
        let ok = try RawHTTPClient.roundTrip(port: h.port, "GET /echo HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(ok.status == 200)
        #expect(try up.events("connection").count == 1)
    }

    /// Malformed responses (RFC 9113 §8.1.1, §8.2, §8.3.2) the hyper-h2 upstream writes by hand (`H2Peers`' `RAW`), one
    /// rule broken in each, before the head reaches the client: each is a stream error (RST_STREAM(PROTOCOL_ERROR) to the
    /// upstream), a 502 `bad_response` to the client with the `upstream error` log line, and nothing of it passes on.
    static let malformedBeforeTheHead = [
        "no-status", "status-twice", "status-after-field", "status-two-digits", "status-not-digits", "status-upper-case",
        "status-101", "request-pseudo", "unknown-pseudo", "upper-case-name", "space-in-name", "empty-name",
        "colon-in-name", "nul-in-value", "cr-in-value", "lf-in-value", "del-in-value", "leading-space", "trailing-tab",
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te-gzip", "two-content-lengths",
        "content-length-not-a-number", "content-length-empty", "content-length-on-a-head-ending-the-stream",
        "content-length-1-in-a-204", "content-length-in-an-interim-head", "interim-head-ending-the-stream",
        "data-after-an-interim-head",
    ]

    /// Malformed past the head (the DATA against `content-length` or a head without content, the trailers): the head
    /// went to the exchange; the response is cut there (the client connection closes, before or after the head was
    /// written), and the malformed part never reaches the client. `bodyCut`: the body the client gets is incomplete
    /// (not when all of it came before the malformed part, or there is none).
    static let malformedAfterTheHead: [(name: String, method: String, bodyCut: Bool)] = [
        ("data-over-content-length", "GET", true), ("data-under-content-length", "GET", true),
        ("data-after-a-204", "GET", false), ("data-to-head", "HEAD", false), ("trailers-without-end-stream", "GET", true),
        ("pseudo-field-in-trailers", "GET", true), ("upper-case-trailer", "GET", true), ("connection-trailer", "GET", true),
        ("control-byte-in-a-trailer", "GET", true), ("content-length-in-trailers-too", "GET", false),
    ]

    /// The stream the upstream logged for `path`, and whether the gateway reset it with PROTOCOL_ERROR (code 1).
    static func resetWithProtocolError(_ up: Upstream, _ path: String) throws -> Bool {
        let request = try #require(try up.waitFor("request").first { $0["path"] as? String == path }, "\(path)")
        let conn = request["conn"] as? Int, stream = request["stream"] as? Int
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if try up.events("reset").contains(where: { $0["conn"] as? Int == conn && $0["stream"] as? Int == stream
                && $0["code"] as? Int == 1 }) { return true }
            usleep(20_000)
        }
        return false
    }

    /// Everything the gateway sends on a new connection for `request` until it closes it (or 5 s of silence).
    static func readAll(_ port: UInt16, _ request: String) throws -> String {
        let c = try RawHTTPClient(port: port, timeout: 10)
        defer { close(c.fd) }
        try c.send(request)
        var all: [UInt8] = []
        while true {
            let chunk = c.readRaw(timeout: 5)
            if chunk.isEmpty { break }
            all += chunk
        }
        return String(decoding: all, as: UTF8.self)
    }

    @Test func malformedResponsesAreStreamErrors() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try Self.harness(up)
        defer { h.stop() }
        for name in Self.malformedBeforeTheHead {
            let r = try RawHTTPClient.roundTrip(port: h.port, "GET /raw/\(name) HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(r.status == 502, "\(name): \(r.status) \(r.headers) \(r.bodyText)")
            #expect(r.bodyText.contains("bad_response"), "\(name): \(r.bodyText)")
            #expect(!r.bodyText.contains("EXCESS") && r.header("x") == nil, "\(name)")
            #expect(try Self.resetWithProtocolError(up, "/raw/\(name)"), "\(name): no RST_STREAM(PROTOCOL_ERROR) upstream")
        }
        for (name, method, bodyCut) in Self.malformedAfterTheHead {
            let text = try Self.readAll(h.port, "\(method) /raw/\(name) HTTP/1.1\r\nHost: a\r\nTE: trailers\r\n\r\n")
            // The head, unless the malformed part came in the same read as it (then the connection closes before the
            // head was written: nothing at all).
            #expect(text.isEmpty || text.hasPrefix("HTTP/1.1 20"), "\(name): \(text)")
            #expect(!text.contains("EXCESS"), "\(name): the malformed part reached the client: \(text)")
            // Cut: a chunked body without its last chunk, or fewer bytes than its content-length.
            let parts = text.components(separatedBy: "\r\n\r\n")
            let head = parts[0].lowercased()
            if !bodyCut || text.isEmpty {
                // (Nothing to cut.)
            } else if head.contains("transfer-encoding: chunked") {
                #expect(!text.hasSuffix("0\r\n\r\n"), "\(name): a complete chunked body: \(text)")
            } else {
                let line = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                let n = line.flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                #expect(n != nil, "\(name): neither chunked nor a content-length: \(text)")
                #expect(parts.dropFirst().joined(separator: "\r\n\r\n").utf8.count < (n ?? 0), "\(name): a complete body: \(text)")
            }
            #expect(try Self.resetWithProtocolError(up, "/raw/\(name)"), "\(name): no RST_STREAM(PROTOCOL_ERROR) upstream")
        }
        let logged = h.logLines().filter { $0.contains("\"upstream error\"") && $0.contains("\"kind\":\"bad_response\"") }
        #expect(logged.count == Self.malformedBeforeTheHead.count + Self.malformedAfterTheHead.count, "\(logged.count) lines")

        // At the edge of the rules, and passed on: a 204's `content-length: 0` (dropped, as nghttp2 dropped it), a
        // HEAD response's `content-length` without DATA, an interim head before the final one, `te: trailers`, HTAB
        // and obs-text inside a value.
        let noContent = try RawHTTPClient.roundTrip(port: h.port, "GET /raw/good-204-with-content-length-0 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(noContent.status == 204)
        #expect(noContent.header("x-kept") == "1")
        #expect(noContent.header("content-length") == nil)
        let head = try RawHTTPClient.roundTrip(port: h.port, "HEAD /raw/good-head-with-content-length HTTP/1.1\r\nHost: a\r\n\r\n",
                                               method: "HEAD")
        #expect(head.status == 200)
        #expect(head.header("content-length") == "10")
        let interim = try RawHTTPClient.roundTrip(port: h.port, "GET /raw/good-interim-then-final HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(interim.status == 200)
        #expect(interim.bodyText == "ok")
        let edge = try RawHTTPClient.roundTrip(port: h.port, "GET /raw/good-te-trailers-obs-text-and-htab HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(edge.status == 200)
        #expect(edge.bodyText == "ok")
        #expect(edge.header("x-v").map { Array($0.utf8).prefix(4) } == Array("a\tb ".utf8).prefix(4))
        #expect(try up.events("reset").count == Self.malformedBeforeTheHead.count + Self.malformedAfterTheHead.count)
        // Stream errors all: the one upstream connection carried every response.
        #expect(try up.events("connection").count == 1)
    }

    /// `protocol: h2` pointed at an HTTP/1.1 server (the harness's sample upstream), and at a port that refuses: a
    /// clean 502 each, never a hang.
    @Test func wrongOrMissingServerIs502() throws {
        let refusing = try TestPKI.refusingPort()
        defer { close(refusing.fd) }
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: h1, prefix: /h1/, upstream: api, enforcement: off }
              - { name: gone, prefix: /gone/, upstream: gone, enforcement: off }
            """, upstreamExtra: """
              gone:
                url: http://127.0.0.1:\(refusing.port)
                protocol: h2
            """)
        }
        defer { h.stop() }
        let gone = try RawHTTPClient.roundTrip(port: h.port, "GET /gone/x HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(gone.status == 502)
        #expect(gone.bodyText.contains("connect_failed"))
        let h1 = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: h1, prefix: /, upstream: h1, enforcement: off }
            """, upstreamExtra: """
              h1:
                url: \($0)
                protocol: h2
                response_timeout: 2s
            """)
        }
        defer { h1.stop() }
        let r = try RawHTTPClient.roundTrip(port: h1.port, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(r.status == 502, "an HTTP/1.1 server answering the h2c preface: \(r.status) \(r.bodyText)")
        #expect(h1.upstream.requestCount == 0, "the preface is not a request the sample upstream served")
    }

    /// `stream_idle_timeout` over an h2 upstream: parts 1.5 s apart all arrive on a route that sets it, though
    /// `response_timeout` is 1 s; without it the response is cut after its head.
    @Test func streamIdleTimeoutReplacesTheResponseGap() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: events, prefix: /trickle/events, upstream: h2, enforcement: off, stream_idle_timeout: 5s }
              - { name: plain, prefix: /, upstream: h2, enforcement: off }
            """, upstreamExtra: """
              h2:
                url: http://127.0.0.1:\(up.port)
                protocol: h2
                response_timeout: 1s
            """)
        }
        defer { h.stop() }
        let events = try Self.curl(["--http1.1", "http://127.0.0.1:\(h.port)/trickle/events"])
        #expect(events.status == 200)
        #expect(events.body == "data: part0\n\ndata: part1\n\ndata: part2\n\n")
        let cut = try BoundedCommand.run("/usr/bin/curl", ["-sS", "--http1.1", "--max-time", "20",
                                                            "http://127.0.0.1:\(h.port)/trickle/plain"], timeout: 30)
        #expect(cut.status != 0, "the response is cut: curl sees an incomplete chunked body")
        #expect(!cut.stdout.contains("part1"))
    }
}
