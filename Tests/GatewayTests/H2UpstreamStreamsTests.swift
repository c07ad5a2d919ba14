import Foundation
import Glibc
@testable import Gateway
import Testing
import TestSupport

/// HTTP/2 upstreams under load and when things go wrong (SPEC §6.1): multiplexing up to the server's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`, a client reset resetting one upstream stream only, a GOAWAY mid-load (h2load), an
/// upstream that never grants window, TLS with ALPN `h2` (and one that selects `http/1.1`: 502).
@Suite(.serialized) struct H2UpstreamStreamsTests {
    typealias Upstream = H2UpstreamTests.Upstream

    /// h2load through the gateway (h2c): its "requests:" summary line, split into its counts.
    static func h2load(_ args: [String]) throws -> (total: Int, succeeded: Int, failed: Int, errored: Int, out: String) {
        let r = try BoundedCommand.run("/usr/bin/h2load", args, timeout: 60)
        guard let line = r.stdout.split(separator: "\n").first(where: { $0.hasPrefix("requests:") }) else {
            throw HarnessError("h2load: \(r.status) \(r.stdout) \(r.stderr)")
        }
        // requests: 200 total, 200 started, 200 done, 200 succeeded, 0 failed, 0 errored, 0 timeout
        let numbers = line.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .punctuationCharacters)) }
        guard numbers.count >= 6 else { throw HarnessError("h2load summary: \(line)") }
        return (numbers[0], numbers[3], numbers[4], numbers[5], r.stdout)
    }

    /// Twenty requests at once that the upstream answers only when all twenty are open: with
    /// `max_concurrent_streams: 5` they need exactly four connections (a new one only when every open one is full); with
    /// the default 100, one.
    @Test(arguments: [(5, 4), (100, 1)])
    func streamsAreMultiplexedUpToTheServersLimit(maxStreams: Int, connections: Int) throws {
        let up = try Upstream(["max_streams": maxStreams])
        defer { up.stop() }
        let h = try H2UpstreamTests.harness(up)
        defer { h.stop() }
        // One request first: the pool learns the server's limit from its SETTINGS.
        #expect(try RawHTTPClient.roundTrip(port: h.port, "GET /echo HTTP/1.1\r\nHost: a\r\n\r\n").status == 200)
        let r = try Self.h2load(["-n", "20", "-c", "1", "-m", "20", "http://127.0.0.1:\(h.port)/hold?n=20"])
        #expect(r.succeeded == 20, "\(r.out)")
        #expect(try up.events("connection").count == connections)
    }

    /// An HTTP/1.1 client load over the same upstream: every request completes, over a few connections only.
    @Test func http1ClientsShareTheConnection() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try H2UpstreamTests.harness(up)
        defer { h.stop() }
        let r = try Self.h2load(["--h1", "-n", "200", "-c", "8", "http://127.0.0.1:\(h.port)/echo"])
        #expect(r.succeeded == 200, "\(r.out)")
        #expect(try up.events("connection").count == 1)
    }

    /// A client that resets its stream makes the gateway reset that upstream stream (RST_STREAM, CANCEL) and nothing
    /// else: the next request goes over the same upstream connection.
    @Test func clientResetResetsOnlyItsUpstreamStream() throws {
        let up = try Upstream()
        defer { up.stop() }
        let h = try H2UpstreamTests.harness(up)
        defer { h.stop() }
        let r = try up.client(h.port, "reset")
        let headers = try #require(r["headers"] as? [[String]])
        #expect(headers.contains([":status", "200"]))
        let resets = try up.waitFor("reset")
        #expect(resets.count == 1)
        #expect(resets.first?["code"] as? Int == 8)
        let requests = try up.events("request")
        #expect(requests.map { $0["path"] as? String } == ["/wait", "/echo"])
        #expect(Set(requests.compactMap { $0["conn"] as? Int }).count == 1)
        #expect(try up.events("connection").count == 1)
        #expect(try up.events("closed").isEmpty)
    }

    /// The upstream sends GOAWAY after every 25 requests of a connection: under h2load every request is answered
    /// (none errored or timed out), streams past a GOAWAY's last stream id are sent again on another connection, and
    /// nearly all succeed (a stream that meets a GOAWAY on every connection it is moved to ends in a clean 502).
    @Test func goAwayMidLoadMovesNewStreamsToANewConnection() throws {
        let up = try Upstream(["goaway_after": 25])
        defer { up.stop() }
        let h = try H2UpstreamTests.harness(up)
        defer { h.stop() }
        let r = try Self.h2load(["-n", "300", "-c", "4", "-m", "10", "http://127.0.0.1:\(h.port)/echo"])
        #expect(r.total == 300)
        #expect(r.succeeded + r.failed == 300 && r.errored == 0, "\(r.out)")
        #expect(r.succeeded >= 290, "\(r.out)")
        #expect(r.out.contains("\(r.failed) 5xx"), "every failure is an answer of the gateway's: \(r.out)")
        let goaways = try up.events("goaway")
        #expect(goaways.count >= 10, "300 requests at 25 per connection")
        #expect(try up.events("connection").count >= goaways.count)
        #expect(try !up.events("ignored").isEmpty, "some streams were past a GOAWAY's last stream")
    }

    /// A stream the upstream refuses (RST_STREAM(REFUSED_STREAM), RFC 9113 §8.7: not processed) is sent again, unseen
    /// by the client: the head kept from the first submission (`H2RequestFields`) goes out the same, field for field,
    /// `x-request-id` included, and the answer is the second stream's.
    @Test func aRefusedStreamIsSentAgainWithTheSameHead() throws {
        let up = try Upstream(["refuse_first": 1])
        defer { up.stop() }
        let h = try H2UpstreamTests.harness(up)
        defer { h.stop() }
        let r = try RawHTTPClient.roundTrip(port: h.port, """
            GET /echo?refused=1 HTTP/1.1\r
            Host: refused.example\r
            X-Kept: yes\r
            Connection: X-Gone\r
            X-Gone: no\r
            \r

            """)
        #expect(r.status == 200)
        let refused = try up.events("refused")
        let served = try up.waitFor("request")
        #expect(refused.count == 1)
        #expect(served.count == 1)
        let first = try #require(refused.first?["headers"] as? [[String]])
        let second = try #require(served.first?["headers"] as? [[String]])
        #expect(first == second)
        #expect(first.first == [":method", "GET"])
        #expect(first.contains([":authority", "refused.example"]))
        #expect(first.contains([":path", "/echo?refused=1"]))
        #expect(first.contains(["x-kept", "yes"]))
        #expect(!first.contains { $0.first == "x-gone" || $0.first == "connection" || $0.first == "host" })
        #expect(first.contains { $0.first == "x-request-id" })
    }

    /// An upstream that never grants any window (`SETTINGS_INITIAL_WINDOW_SIZE` 0): a 4 MB upload is held at the
    /// client (never buffered whole), the answer is 504 once `response_timeout` passes, and the upstream stream is reset.
    /// (An HTTP/1.1 client: curl 7.88 over HTTP/2 reports the RST_STREAM(NO_ERROR) after the complete answer as an
    /// error, RFC 9113 §8.1 notwithstanding.)
    @Test func upstreamThatNeverGrantsWindowGets504() throws {
        let up = try Upstream(["window": 0])
        defer { up.stop() }
        let h = try H2UpstreamTests.harness(up)
        defer { h.stop() }
        let file = NSTemporaryDirectory() + "upload-\(UUID().uuidString)"
        try Data(repeating: 0x61, count: 4 << 20).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        // The connection is up first (the server's SETTINGS known: hyper-h2 counts DATA sent before them against its own
        // new window of 0 and closes the connection).
        #expect(try RawHTTPClient.roundTrip(port: h.port, "GET /echo?warm HTTP/1.1\r\nHost: a\r\n\r\n").status == 200)
        let r = try H2UpstreamTests.curl(["--http1.1", "--data-binary", "@" + file, "http://127.0.0.1:\(h.port)/echo"])
        #expect(r.status == 504)
        #expect(r.body.contains("response_timeout"))
        #expect(try up.waitFor("reset").count == 1)
        #expect(try up.events("request").map { $0["path"] as? String } == ["/echo?warm"],
                "the upload never ended at the upstream")
        #expect(try up.events("connection").count == 1)
    }

    // MARK: TLS

    /// `https://` with ALPN `h2`: requests flow over TLS; an upstream that selects `http/1.1` is 502 `alpn_not_h2`.
    @Test(arguments: ["h2", "http/1.1"])
    func tlsUpstreamMustSelectH2(alpn: String) throws {
        let pki = try TestPKI()
        let up = try Upstream(["cert": pki.cert, "key": pki.key, "alpn": alpn])
        defer { up.stop() }
        let h = try H2UpstreamTests.harness(up, scheme: "https", extra: "    ca_file: \(pki.caCert)")
        defer { h.stop() }
        let r = try H2UpstreamTests.curl(["--http2-prior-knowledge", "http://127.0.0.1:\(h.port)/echo?trailers=1"])
        if alpn == "h2" {
            #expect(r.status == 200)
            #expect(r.dump.contains("x-trailer: done"))
            #expect(try up.events("alpn").first?["protocol"] as? String == "h2")
        } else {
            #expect(r.status == 502)
            #expect(r.body.contains("alpn_not_h2"))
        }
    }
}
