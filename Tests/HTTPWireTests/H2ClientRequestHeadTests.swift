import CNghttp2
import Testing
@testable import HTTPWire

/// `H2ClientRequestHead`: the HTTP/1.1 request head the gateway writes, sent as an HTTP/2 request by an
/// `H2ClientSession` and read back by the gateway's own `H2ServerSession` (nghttp2 on both ends).
@Suite struct H2ClientRequestHeadTests {
    static func head(_ lines: [String]) -> [UInt8] {
        Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
    }

    static func make(_ bytes: [UInt8], limits: HTTPParserLimits = .default) -> H2ClientRequestHead? {
        bytes.withUnsafeBytes { H2ClientRequestHead($0, limits: limits) }
    }

    /// Submits `head` on a fresh client session and returns what the server session received.
    static func roundTrip(_ head: H2ClientRequestHead, defaultAuthority: String = "fallback.example")
        -> (head: HTTPRequestHead?, endStream: Bool?, fields: [String]) {
        let server = H2Recorder()
        let serverSession = H2ServerSession(delegate: server)
        let client = H2ClientSession(delegate: H2ClientRecorder())
        let id = client.submitRequest(head, scheme: "http", defaultAuthority: defaultAuthority)
        #expect(id == 1)
        H2ClientSessionTests.pump(client, serverSession)
        let received = server.heads[1]
        return (received, server.endStreamOnHead[1], received.map { H2ClientSessionTests.fields($0.headers) } ?? [])
    }

    @Test func aWrittenHeadArrivesAsItsHTTP2Form() throws {
        let bytes = Self.head([
            "POST /bench.Echo/Say?x=1 HTTP/1.1", "Content-Type: application/grpc", "User-Agent: h2load",
            "X-Firebase-AppCheck: eyJ.token.sig", "Host: up.example:8443", "X-Forwarded-For: 10.0.0.1",
            "X-Request-Id: 0123abcd", "X-AppCheck-Status: verified", "TE: trailers", "Content-Length: 7",
        ])
        let head = try #require(Self.make(bytes))
        #expect(head.method == "POST")
        #expect(head.path == "/bench.Echo/Say?x=1")
        #expect(!head.endStream)
        let (received, endStream, fields) = Self.roundTrip(head)
        #expect(received?.method == "POST")
        #expect(received?.target == "/bench.Echo/Say?x=1")
        #expect(endStream == false)
        #expect(fields.contains("host: up.example:8443"))
        for field in ["content-type: application/grpc", "user-agent: h2load", "x-firebase-appcheck: eyJ.token.sig",
                      "x-forwarded-for: 10.0.0.1", "x-request-id: 0123abcd", "x-appcheck-status: verified",
                      "te: trailers", "content-length: 7"] {
            #expect(fields.contains(field), "\(field) missing from \(fields)")
        }
    }

    @Test func connectionSpecificFieldsAreLeftOutAndChunkedMeansABody() throws {
        let bytes = Self.head([
            "PUT /up HTTP/1.1", "Connection: keep-alive", "Keep-Alive: timeout=5", "Proxy-Connection: x",
            "Upgrade: websocket", "TE: gzip", "X-Kept: yes", "Host: h", "Transfer-Encoding: chunked",
        ])
        let head = try #require(Self.make(bytes))
        #expect(!head.endStream)
        let (_, endStream, fields) = Self.roundTrip(head)
        #expect(endStream == false)
        #expect(fields.sorted() == ["host: h", "x-kept: yes"])
    }

    @Test func noBodyEndsTheStreamWithItsHeaders() throws {
        for extra in [[], ["Content-Length: 0"]] {
            let head = try #require(Self.make(Self.head(["GET /a HTTP/1.1", "Host: h"] + extra)))
            #expect(head.endStream)
            let (received, endStream, _) = Self.roundTrip(head)
            #expect(received?.method == "GET")
            #expect(endStream == true)
        }
    }

    @Test func withoutHostTheUpstreamIsTheAuthority() throws {
        let head = try #require(Self.make(Self.head(["GET / HTTP/1.1", "X-A: b"])))
        let (_, _, fields) = Self.roundTrip(head, defaultAuthority: "upstream.example:8080")
        #expect(fields.contains("host: upstream.example:8080"))
    }

    /// A value with a control byte other than HTAB (from a claim, say) is left out; the rest of the head goes.
    @Test func aValueWithAControlByteIsLeftOut() throws {
        let head = try #require(Self.make(Self.head(["GET / HTTP/1.1", "Host: h", "X-App: a\u{01}b", "X-Tab: a\tb"])))
        let (_, _, fields) = Self.roundTrip(head)
        #expect(fields.sorted() == ["host: h", "x-tab: a\tb"])
    }

    @Test func whatIsNotOneHeadIsRefused() {
        let bad: [[UInt8]] = [
            Array("GET / HTTP/1.1\r\nHost: h\r\n".utf8),            // no empty line
            Array("GET / HTTP/1.1\r\nHost: h\r\n\r\nextra".utf8),   // bytes after it
            Array("GET / HTTP/1.1\r\nHost h\r\n\r\n".utf8),         // no colon
            Array("GET / HTTP/1.1\r\n: h\r\n\r\n".utf8),            // empty name
            Array("GET / HTTP/1.1\rHost: h\r\n\r\n".utf8),          // bare CR
            Array("GET\r\nHost: h\r\n\r\n".utf8),                   // request line without target
            Array("GET /\r\nHost: h\r\n\r\n".utf8),                 // nor version
            [],
        ]
        for bytes in bad { #expect(Self.make(bytes) == nil, "\(String(decoding: bytes, as: UTF8.self))") }
    }

    /// The upstream parser limits the full parse applied before: one over each is refused.
    @Test func limitsAreKept() {
        let fields = (0..<5).map { "X-\($0): v" }
        let bytes = Self.head(["GET / HTTP/1.1", "Host: h"] + fields)
        #expect(Self.make(bytes, limits: HTTPParserLimits(maxHeaders: 6)) != nil)
        #expect(Self.make(bytes, limits: HTTPParserLimits(maxHeaders: 5)) == nil)
        #expect(Self.make(bytes, limits: HTTPParserLimits(maxHeadBytes: bytes.count)) != nil)
        #expect(Self.make(bytes, limits: HTTPParserLimits(maxHeadBytes: bytes.count - 1)) == nil)
        #expect(Self.make(bytes, limits: HTTPParserLimits(maxRequestLineBytes: 14)) != nil)
        #expect(Self.make(bytes, limits: HTTPParserLimits(maxRequestLineBytes: 13)) == nil)
    }

    /// `x-request-id` differs on every request: it takes no entry of the connection's HPACK table (the fields that
    /// repeat stay indexed), while a repeated field is indexed once.
    @Test func theRequestIdIsNeverIndexed() throws {
        let server = H2Recorder()
        let serverSession = H2ServerSession(delegate: server)
        let client = H2ClientSession(delegate: H2ClientRecorder())
        H2ClientSessionTests.pump(client, serverSession)
        var sizes: [Int] = []
        for n in 0..<3 {
            let head = try #require(Self.make(Self.head(["GET / HTTP/1.1", "Host: h", "X-Token: same", "X-Request-Id: id-\(n)"])))
            #expect(client.submitRequest(head, scheme: "http", defaultAuthority: "") != nil)
            H2ClientSessionTests.pump(client, serverSession)
            sizes.append(nghttp2_session_get_hd_deflate_dynamic_table_size(client.session))
        }
        #expect(sizes[0] > 0)
        #expect(sizes[1] == sizes[0] && sizes[2] == sizes[0])
        #expect(server.heads.values.compactMap { $0.headers.firstValue(forLowercased: "x-request-id") }.sorted() == ["id-0", "id-1", "id-2"])
    }
}
