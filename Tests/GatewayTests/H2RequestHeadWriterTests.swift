import CNghttp2
import EventLoop
@testable import Gateway
@testable import GatewayConfig
@testable import HTTPWire
@testable import ProxyCore
import TestSupport
import Testing

/// `RequestHeadWriter.writeH2`, the direct HTTP/2 request head of an `h2` upstream, against what the gateway sent
/// before it: the HTTP/1.1 text of `RequestHeadWriter.write` translated by `H2ClientRequestHead`. For each head the two
/// give the same `nghttp2_nv` array (pseudo fields, fields, order, values, the never-indexed flag), the same END_STREAM,
/// and the same refusals (a value with CR, LF or NUL; a head over the upstream parser limits).
@Suite struct H2RequestHeadWriterTests {
    static let yaml = """
    app_check:
      project_number: "123456789012"
    upstreams:
      plain:
        url: http://up.example:8080
        protocol: h2
      based:
        url: http://127.0.0.1:9/base
        protocol: h2
    routes:
      - name: forward
        prefix: /forward/
        upstream: plain
        enforcement: enforce
        forward_token: true
      - name: monitor
        prefix: /monitor/
        upstream: based
        enforcement: monitor
      - name: enforce
        prefix: /
        upstream: plain
        enforcement: enforce
    """

    struct Inputs {
        var routes: [CompiledRoute]
        var upstreams: [UpstreamSettings]
    }

    static func inputs() throws -> Inputs {
        let settings = try ConfigLoader.load(yaml: yaml, path: "h2head.yaml", environment: [:]).get()
        return Inputs(routes: CompiledRoute.compile(settings), upstreams: settings.upstreams)
    }

    static func parse(_ text: String) throws -> HTTPRequestHead {
        var parser = HTTPRequestHeadParser()
        let bytes = Array(text.utf8)
        guard case .complete(let head, _) = bytes.withUnsafeBytes({ parser.parse($0) }) else {
            throw HarnessError("head did not parse: \(text)")
        }
        return head
    }

    struct NV: Equatable, CustomStringConvertible {
        var name: String
        var value: String
        var neverIndexed: Bool
        var description: String { "\(name): \(value)\(neverIndexed ? " (never indexed)" : "")" }
    }

    static func fields(_ nva: UnsafeBufferPointer<nghttp2_nv>) -> [NV] {
        nva.map { nv in
            NV(name: String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self),
               value: String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self),
               neverIndexed: nv.flags & UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) != 0)
        }
    }

    /// What each path gives: nil when the writer refused the head (unsafe), `.tooLarge` when the limits did.
    enum Result: Equatable {
        case unsafe
        case tooLarge
        case head([NV], endStream: Bool)
    }

    struct Case {
        var text: String
        var route = "enforce"
        var appCheck = AppCheckOutcome.skipped
        var requestId = RequestID(client: "req-1")
        var peerIP = "10.1.2.3"
        var trusted = false
        var limits = HTTPParserLimits.default
    }

    /// Both paths for `c`: (before, now).
    static func both(_ c: Case, _ inputs: Inputs) throws -> (Result, Result) {
        let head = try parse(c.text)
        let target = try RequestTarget.parse(head.target).get()
        let route = try #require(inputs.routes.first { $0.name == c.route })
        let upstream = inputs.upstreams[route.upstreamIndex]
        let out = IOBuffer(capacity: 0)
        let safe = RequestHeadWriter.write(
            head: head, path: target.path, query: target.query, absoluteHost: target.absoluteHost, route: route,
            upstream: upstream, requestId: c.requestId, appCheck: c.appCheck, peerIP: c.peerIP, trusted: c.trusted,
            scheme: "http", into: out)
        let before: Result
        if !safe {
            before = .unsafe
        } else if let translated = H2ClientRequestHead(out.readable, limits: c.limits) {
            before = translated.withNV(scheme: upstream.scheme, defaultAuthority: { upstream.authority }) {
                .head(fields($0), endStream: translated.endStream)
            }
        } else {
            before = .tooLarge
        }
        out.clear()
        let now: Result
        if let draft = RequestHeadWriter.writeH2(
            head: head, path: target.path, query: target.query, absoluteHost: target.absoluteHost, route: route,
            upstream: upstream, requestId: c.requestId, appCheck: c.appCheck, peerIP: c.peerIP, trusted: c.trusted,
            scheme: "http", limits: c.limits, into: out) {
            if draft.fits {
                let fields = H2RequestFields(records: out.readable, layout: draft.layout)
                now = fields.withNV(scheme: upstream.scheme, defaultAuthority: { upstream.authority }) {
                    .head(Self.fields($0), endStream: fields.endStream)
                }
            } else {
                now = .tooLarge
            }
        } else {
            now = .unsafe
        }
        return (before, now)
    }

    static let grpc = """
        POST /bench.Echo/Say HTTP/1.1\r
        Host: up.example\r
        Content-Type: application/grpc\r
        TE: trailers\r
        X-Firebase-AppCheck: eyJ.token.sig\r
        User-Agent: grpc-c/1.0\r
        Content-Length: 7\r
        \r

        """

    /// Computed: `Case` holds non-`Sendable` values (a `RequestID`, an outcome), which a static stored array may not.
    static var cases: [(String, Case)] { [
        ("gRPC call, token removed", Case(text: grpc)),
        ("gRPC call, token forwarded", Case(text: grpc.replacingOccurrences(of: "/bench", with: "/forward/bench"), route: "forward",
                                            appCheck: AppCheckOutcome(status: .verified, outcome: .verified, appId: "1:123:ios:abc"))),
        ("hop-by-hop and Connection-listed fields removed", Case(text: """
            GET /a?b=1 HTTP/1.1\r
            Host: a.example\r
            Connection: keep-alive, X-Secret\r
            X-Secret: s\r
            Keep-Alive: timeout=5\r
            Proxy-Connection: x\r
            Upgrade: h2c\r
            TE: gzip, trailers;q=1\r
            Trailer: X-T\r
            Proxy-Authorization: Basic x\r
            X_Under: 1\r
            X-AppCheck-Status: verified\r
            X-Request-Id: forged\r
            Expect: 100-continue\r
            DPoP: proof\r
            X-Kept: Yes\r
            Cookie: a=1\r
            \r

            """)),
        ("mixed-case names lower-cased, repeated fields in order", Case(text: """
            PUT /up HTTP/1.1\r
            HOST: Mixed.Example:81\r
            X-Multi: one\r
            x-multi: two\r
            ACCEPT: */*\r
            Transfer-Encoding: chunked\r
            \r

            """)),
        ("no Host: the upstream's authority", Case(text: "GET / HTTP/1.0\r\nX-A: b\r\n\r\n")),
        ("absolute-form target wins over Host", Case(text: "GET http://abs.example:81/p?q=1 HTTP/1.1\r\nHost: other\r\n\r\n")),
        ("forwarded fields of a trusted peer", Case(text: """
            GET /f HTTP/1.1\r
            Host: h\r
            X-Forwarded-For: 1.1.1.1\r
            X-Forwarded-For: 2.2.2.2, 3.3.3.3\r
            X-Forwarded-Proto: https\r
            X-Forwarded-Host: front.example\r
            \r

            """, trusted: true)),
        ("forwarded fields of an untrusted peer", Case(text: """
            GET /f HTTP/1.1\r
            Host: h\r
            X-Forwarded-For: 1.1.1.1\r
            X-Forwarded-Proto: https\r
            X-Forwarded-Host: front.example\r
            \r

            """)),
        ("Content-Length: 0 ends the stream", Case(text: "POST /z HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")),
        ("monitor route: reason, base path", Case(text: "GET /monitor/x?y HTTP/1.1\r\nHost: h\r\n\r\n", route: "monitor",
                                                  appCheck: AppCheckOutcome(status: .invalid, outcome: .invalid, reason: "token_expired"))),
        ("generated request id", Case(text: "GET /g HTTP/1.1\r\nHost: h\r\n\r\n", requestId: RequestID(bits: (0x0123_4567_89ab_cdef, 42)))),
        ("a claim with a control byte is left out", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n",
                                                         appCheck: AppCheckOutcome(status: .verified, outcome: .verified, appId: "app\u{01}id"))),
        ("a claim with DEL is left out", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n",
                                              appCheck: AppCheckOutcome(status: .verified, outcome: .verified, appId: "app\u{7F}"))),
        ("a claim with OWS around it is trimmed", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n",
                                                       appCheck: AppCheckOutcome(status: .verified, outcome: .verified, appId: " \tapp id\t "))),
        ("an empty claim", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n",
                                appCheck: AppCheckOutcome(status: .verified, outcome: .verified, appId: ""))),
        ("a claim with CR LF is refused", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n",
                                               appCheck: AppCheckOutcome(status: .verified, outcome: .verified, appId: "a\r\nEvil: 1"))),
        ("a claim with NUL is refused", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n",
                                             appCheck: AppCheckOutcome(status: .verified, outcome: .verified, appId: "a\0b"))),
        ("a request id with LF is refused", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n", requestId: RequestID(client: "a\nb"))),
        ("a peer address with CR is refused", Case(text: "GET /c HTTP/1.1\r\nHost: h\r\n\r\n", peerIP: "10.0.0.1\r")),
        ("over maxHeaders", Case(text: grpc, limits: HTTPParserLimits(maxHeaders: 9))),
        ("at maxHeaders", Case(text: grpc, limits: HTTPParserLimits(maxHeaders: 10))),
        ("over maxRequestLineBytes", Case(text: grpc, limits: HTTPParserLimits(maxRequestLineBytes: 28))),
        ("at maxRequestLineBytes", Case(text: grpc, limits: HTTPParserLimits(maxRequestLineBytes: 29))),
    ] }

    @Test(arguments: 0..<23)
    func theDirectHeadIsTheTranslatedOne(_ index: Int) throws {
        #expect(Self.cases.count == 23)
        let (name, c) = Self.cases[index]
        let (before, now) = try Self.both(c, Self.inputs())
        #expect(before == now, "\(name)")
    }

    /// The cases above do reach every outcome, and the head's text size bound is met exactly at its edge.
    @Test func theCasesCoverEveryOutcome() throws {
        let inputs = try Self.inputs()
        var outcomes: [Result] = []
        for (_, c) in Self.cases { outcomes.append(try Self.both(c, inputs).1) }
        #expect(outcomes.contains(.unsafe))
        #expect(outcomes.contains(.tooLarge))
        #expect(outcomes.contains { if case .head(_, true) = $0 { true } else { false } })
        #expect(outcomes.contains { if case .head(_, false) = $0 { true } else { false } })
        // maxHeadBytes: the text's exact size passes, one byte less does not, on both paths.
        let head = try Self.parse(Self.grpc)
        let route = try #require(inputs.routes.first { $0.name == "enforce" })
        let out = IOBuffer(capacity: 0)
        #expect(RequestHeadWriter.write(head: head, path: "/bench.Echo/Say", query: nil, absoluteHost: nil, route: route,
                                        upstream: inputs.upstreams[route.upstreamIndex], requestId: RequestID(client: "req-1"),
                                        appCheck: .skipped, peerIP: "10.1.2.3", trusted: false, scheme: "http", into: out))
        let size = out.readableCount
        for (limit, fits) in [(size, true), (size - 1, false)] {
            let (before, now) = try Self.both(Case(text: Self.grpc, limits: HTTPParserLimits(maxHeadBytes: limit)), inputs)
            #expect(before == now)
            #expect((now != .tooLarge) == fits, "maxHeadBytes \(limit) for a head of \(size) bytes")
        }
    }

    /// What the gRPC head sends, spelled out (the comparison above could hold for two equal mistakes).
    @Test func theGRPCHeadAsSent() throws {
        let (_, now) = try Self.both(Case(text: Self.grpc), Self.inputs())
        let expected: [NV] = [
            NV(name: ":method", value: "POST", neverIndexed: false),
            NV(name: ":scheme", value: "http", neverIndexed: false),
            NV(name: ":authority", value: "up.example", neverIndexed: false),
            NV(name: ":path", value: "/bench.Echo/Say", neverIndexed: false),
            NV(name: "content-type", value: "application/grpc", neverIndexed: false),
            NV(name: "user-agent", value: "grpc-c/1.0", neverIndexed: false),
            NV(name: "x-forwarded-for", value: "10.1.2.3", neverIndexed: false),
            NV(name: "x-forwarded-proto", value: "http", neverIndexed: false),
            NV(name: "x-forwarded-host", value: "up.example", neverIndexed: false),
            NV(name: "x-request-id", value: "req-1", neverIndexed: true),
            NV(name: "x-appcheck-status", value: "skipped", neverIndexed: false),
            NV(name: "te", value: "trailers", neverIndexed: false),
            NV(name: "content-length", value: "7", neverIndexed: false),
        ]
        #expect(now == .head(expected, endStream: false))
    }
}
