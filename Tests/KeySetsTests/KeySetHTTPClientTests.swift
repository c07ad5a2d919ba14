import Foundation
import GatewayTools
import Glibc
import Testing
@testable import KeySets

/// `BlockingHTTPClient` over real sockets against `SampleUpstream` and `KeySetServer`, plus URL and
/// `Cache-Control` parsing.
@Suite struct KeySetHTTPClientTests {
    func fetchError(_ body: () throws -> Void) -> FetchError? {
        do {
            try body()
            return nil
        } catch let error as FetchError {
            return error
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func contentLengthChunkedAndCloseDelimitedBodies() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let client = BlockingHTTPClient(timeout: 5)
        let base = "http://127.0.0.1:\(upstream.address.port)"
        let expected = SampleConnectionPattern.bytes(100_000)
        let sized = try client.get(base + "/bytes/100000")
        #expect(sized.status == 200 && sized.body == expected)
        #expect(sized.headers["x-upstream"] == "sample")
        #expect(sized.headers["X-UPSTREAM"] == "sample")
        #expect(sized.headers.values("Content-Length") == ["100000"])
        let chunked = try client.get(base + "/chunked/100000")
        #expect(chunked.body == expected)
        let delimited = try client.get(base + "/close-delimited/100000")
        #expect(delimited.body == expected)
        let empty = try client.get(base + "/bytes/0")
        #expect(empty.body.isEmpty)
    }

    @Test func bodyOverTheLimitIsRefusedWhateverTheFraming() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        // Limits below SampleUpstream's 256 KiB mid-response flush: with `Connection: close` it closes a chunked
        // response as soon as its buffer drains, so larger chunked bodies arrive truncated.
        let client = BlockingHTTPClient(timeout: 5, maxBodyBytes: 100_000)
        let base = "http://127.0.0.1:\(upstream.address.port)"
        for path in ["/bytes/100001", "/chunked/100001", "/close-delimited/100001"] {
            #expect(fetchError { _ = try client.get(base + path) } == .bodyTooLarge(100_000), "\(path)")
        }
        for path in ["/bytes/100000", "/chunked/100000", "/close-delimited/100000"] {
            #expect(try client.get(base + path).body.count == 100_000, "\(path)")
        }
        // The default limit is the JWKS limit, 1 MiB.
        #expect(fetchError { _ = try BlockingHTTPClient(timeout: 5).get(base + "/bytes/1048577") } == .bodyTooLarge(1 << 20))
        #expect(try BlockingHTTPClient(timeout: 5).get(base + "/bytes/1048576").body.count == 1 << 20)
    }

    @Test func statusOtherThan200IsAnError() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let client = BlockingHTTPClient(timeout: 5)
        #expect(fetchError { _ = try client.get("http://127.0.0.1:\(upstream.address.port)/status/404") } == .status(404))
        #expect(FetchError.status(404).description == "HTTP status 404")
    }

    @Test func totalTimeoutBoundsAHangingServer() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let client = BlockingHTTPClient(timeout: 0.5)
        // `/hang` never answers: a timeout error at all is the client's own deadline at work.
        let error = fetchError { _ = try client.get("http://127.0.0.1:\(upstream.address.port)/hang") }
        #expect(error == .timeout("read"))
    }

    @Test func refusedConnectionAndBadURLs() throws {
        let probe = try KeySetServer()
        let port = probe.port
        probe.stop()
        let client = BlockingHTTPClient(timeout: 2)
        #expect(fetchError { _ = try client.get("http://127.0.0.1:\(port)/jwks") } == .connectionRefused("127.0.0.1:\(port)"))
        #expect(fetchError { _ = try client.get("ftp://x/y") } == .unsupportedScheme("ftp"))
        #expect(fetchError { _ = try client.get("no-scheme") } != nil)
        #expect(fetchError { _ = try client.get("http://user:pw@host/") } != nil)
        if case .resolve = fetchError({ _ = try client.get("http://no-such-host.invalid/jwks") }) {} else {
            Issue.record("expected a resolve error")
        }
    }

    @Test func fileURLs() throws {
        let dir = try KeySetFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "hello".write(toFile: dir + "/a.json", atomically: true, encoding: .utf8)
        let client = BlockingHTTPClient()
        #expect(try client.get("file://" + dir + "/a.json").body == Array("hello".utf8))
        if case .file(let why) = fetchError({ _ = try client.get("file://" + dir + "/missing.json") }) {
            #expect(why.contains("missing.json"))
        } else {
            Issue.record("expected a file error")
        }
        try String(repeating: "x", count: 2000).write(toFile: dir + "/big.json", atomically: true, encoding: .utf8)
        #expect(fetchError { _ = try BlockingHTTPClient(maxBodyBytes: 1000).get("file://" + dir + "/big.json") } == .bodyTooLarge(1000))
    }

    @Test func keySetServerServesTheDocumentAndCacheControl() throws {
        let server = try KeySetServer(document: "{\"keys\":[]}")
        defer { server.stop() }
        let client = BlockingHTTPClient(timeout: 5)
        var r = try client.get(server.url)
        #expect(String(decoding: r.body, as: UTF8.self) == "{\"keys\":[]}")
        #expect(r.headers["cache-control"] == nil)
        server.setCacheControl("max-age=5")
        server.setDocument("{\"keys\":[1]}")
        r = try client.get("http://\(server.address)/any/path")
        #expect(String(decoding: r.body, as: UTF8.self) == "{\"keys\":[1]}")
        #expect(r.headers["Cache-Control"] == "max-age=5")
        server.setAvailable(false)
        #expect(fetchError { _ = try client.get(server.url) } == .status(503))
        #expect(server.fetchCount == 3)
        server.stop()
        #expect(fetchError { _ = try client.get(server.url) } == .connectionRefused("\(server.address)"))
    }

    @Test func urlParsing() throws {
        let a = try FetchURL("https://Example.COM/v1/jwks?x=1#frag")
        #expect(a == FetchURL(scheme: "https", host: "example.com", port: 443, target: "/v1/jwks?x=1"))
        #expect(a.hostHeader == "example.com")
        let b = try FetchURL("http://127.0.0.1:8080")
        #expect(b == FetchURL(scheme: "http", host: "127.0.0.1", port: 8080, target: "/"))
        #expect(b.hostHeader == "127.0.0.1:8080")
        let c = try FetchURL("http://[::1]:9000/k")
        #expect(c.host == "::1" && c.port == 9000 && c.hostHeader == "[::1]:9000")
        #expect(try FetchURL("file:///etc/jwks.json").target == "/etc/jwks.json")
        #expect(try FetchURL("file://localhost/etc/jwks.json").target == "/etc/jwks.json")
        #expect(throws: FetchError.self) { try FetchURL("file://relative/path") }
        #expect(throws: FetchError.self) { try FetchURL("http://host:0/") }
        #expect(throws: FetchError.self) { try FetchURL("http://host:99999/") }
        #expect(throws: FetchError.self) { try FetchURL("http:///path") }
        #expect(throws: FetchError.self) { try FetchURL("http://host/a b") }
    }

    @Test func cacheControlLifetime() throws {
        var s = JWKSSettings()
        s.maxAge = 600
        s.unknownKidRefreshInterval = 60
        func life(_ values: [String]) -> Double { KeySetLifetime.seconds(cacheControl: values, settings: s) }
        #expect(life([]) == 600)
        #expect(life(["public, max-age=300"]) == 300)
        #expect(life(["max-age=\"120\""]) == 120)
        #expect(life(["MAX-AGE=100, must-revalidate"]) == 100)
        #expect(life(["max-age=3600"]) == 600)
        #expect(life(["max-age=99999999999999999999"]) == 600)
        #expect(life(["max-age=abc"]) == 600)
        #expect(life(["max-age=-5"]) == 600)
        #expect(life(["max-age=10", "max-age=20"]) == 600)
        #expect(life(["max-age=0"]) == 60)
        #expect(life(["no-store"]) == 60)
        #expect(life(["private", "no-cache, max-age=300"]) == 60)
        s.maxAge = 30
        #expect(life(["no-cache"]) == 30)
    }
}

/// The byte pattern `SampleUpstream` serves for `/bytes/N`.
enum SampleConnectionPattern {
    static func bytes(_ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 13) } }
}
