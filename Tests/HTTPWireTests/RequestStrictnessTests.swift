import Testing
@testable import HTTPWire

/// One malformed request and the exact error it must produce.
struct BadRequestCase: Sendable, CustomTestStringConvertible {
    var name: String
    var input: [UInt8]
    var status: Int
    var reason: String

    init(_ name: String, _ text: String, _ status: Int, _ reason: String) {
        self.name = name
        self.input = Array(text.utf8)
        self.status = status
        self.reason = reason
    }

    init(_ name: String, bytes: [UInt8], _ status: Int, _ reason: String) {
        self.name = name
        self.input = bytes
        self.status = status
        self.reason = reason
    }

    var testDescription: String { name }
}

private let host = "Host: a\r\n"

let badRequests: [BadRequestCase] = [
    // Request line (RFC 9112 §3)
    .init("method with non-tchar", "G(ET / HTTP/1.1\r\n\(host)\r\n", 400, "invalid_method"),
    .init("empty method", " / HTTP/1.1\r\n\(host)\r\n", 400, "invalid_method"),
    .init("method only", "GET\r\n\(host)\r\n", 400, "invalid_method"),
    .init("empty target", "GET  HTTP/1.1\r\n\(host)\r\n", 400, "invalid_target"),
    .init("target with DEL", "GET /a\u{7F} HTTP/1.1\r\n\(host)\r\n", 400, "invalid_target"),
    .init("target with tab", "GET /a\tb HTTP/1.1\r\n\(host)\r\n", 400, "invalid_target"),
    .init("target with obs-text", bytes: Array("GET /".utf8) + [0xC3, 0xA9] + Array(" HTTP/1.1\r\n\(host)\r\n".utf8),
          400, "invalid_target"),
    .init("no version", "GET /\r\n\(host)\r\n", 400, "invalid_target"),
    .init("two spaces before version", "GET /  HTTP/1.1\r\n\(host)\r\n", 400, "invalid_http_version"),
    .init("trailing space after version", "GET / HTTP/1.1 \r\n\(host)\r\n", 400, "invalid_http_version"),
    .init("lower-case http", "GET / http/1.1\r\n\(host)\r\n", 400, "invalid_http_version"),
    .init("two-digit minor", "GET / HTTP/1.10\r\n\(host)\r\n", 400, "invalid_http_version"),
    .init("no minor", "GET / HTTP/1\r\n\(host)\r\n", 400, "invalid_http_version"),
    .init("HTTP/1.2", "GET / HTTP/1.2\r\n\(host)\r\n", 505, "http_version_not_supported"),
    .init("HTTP/2.0", "GET / HTTP/2.0\r\n\(host)\r\n", 505, "http_version_not_supported"),
    .init("HTTP/0.9", "GET / HTTP/0.9\r\n\(host)\r\n", 505, "http_version_not_supported"),
    // Line endings (RFC 9112 §2.2)
    .init("bare CR in request line", "GET /\ra HTTP/1.1\r\n\(host)\r\n", 400, "bare_cr"),
    .init("bare CR in header value", "GET / HTTP/1.1\r\nX: a\rb\r\n\(host)\r\n", 400, "bare_cr"),
    .init("bare CR as line end", "GET / HTTP/1.1\r\nX: a\rHost: a\r\n\r\n", 400, "bare_cr"),
    .init("bare LF ending request line", "GET / HTTP/1.1\n\(host)\r\n", 400, "bare_lf"),
    .init("bare LF ending a field", "GET / HTTP/1.1\r\nHost: a\n\r\n", 400, "bare_lf"),
    .init("bare LF ending the head", "GET / HTTP/1.1\r\nHost: a\r\n\n", 400, "bare_lf"),
    .init("bare LF before request line", "\nGET / HTTP/1.1\r\n\(host)\r\n", 400, "bare_lf"),
    .init("bare CR before request line", "\rGET / HTTP/1.1\r\n\(host)\r\n", 400, "bare_cr"),
    // Field lines (RFC 9112 §5, RFC 9110 §5.1, §5.5)
    .init("NUL in value", "GET / HTTP/1.1\r\nX: a\u{0}b\r\n\(host)\r\n", 400, "invalid_field_value"),
    .init("control byte in value", "GET / HTTP/1.1\r\nX: a\u{1}b\r\n\(host)\r\n", 400, "invalid_field_value"),
    .init("DEL in value", "GET / HTTP/1.1\r\nX: a\u{7F}\r\n\(host)\r\n", 400, "invalid_field_value"),
    .init("NUL in name", "GET / HTTP/1.1\r\nX\u{0}Y: a\r\n\(host)\r\n", 400, "invalid_field_name"),
    .init("non-token name", "GET / HTTP/1.1\r\nX(Y): a\r\n\(host)\r\n", 400, "invalid_field_name"),
    .init("whitespace before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, "whitespace_before_colon"),
    .init("tab before colon", "GET / HTTP/1.1\r\nX\t: a\r\n\(host)\r\n", 400, "whitespace_before_colon"),
    .init("obs-fold", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\(host)\r\n", 400, "obs_fold"),
    .init("obs-fold with tab", "GET / HTTP/1.1\r\n\(host)\tb\r\n\r\n", 400, "obs_fold"),
    .init("leading space on first field", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", 400, "obs_fold"),
    .init("empty field name", "GET / HTTP/1.1\r\n: a\r\n\(host)\r\n", 400, "empty_field_name"),
    .init("missing colon", "GET / HTTP/1.1\r\nHost\r\n\r\n", 400, "missing_colon"),
    // Content-Length (RFC 9110 §8.6)
    .init("CL not digits", "POST / HTTP/1.1\r\n\(host)Content-Length: abc\r\n\r\n", 400, "invalid_content_length"),
    .init("CL negative", "POST / HTTP/1.1\r\n\(host)Content-Length: -1\r\n\r\n", 400, "invalid_content_length"),
    .init("CL with plus", "POST / HTTP/1.1\r\n\(host)Content-Length: +5\r\n\r\n", 400, "invalid_content_length"),
    .init("CL hex", "POST / HTTP/1.1\r\n\(host)Content-Length: 0x5\r\n\r\n", 400, "invalid_content_length"),
    .init("CL with inner space", "POST / HTTP/1.1\r\n\(host)Content-Length: 5 5\r\n\r\n", 400, "invalid_content_length"),
    .init("CL empty", "POST / HTTP/1.1\r\n\(host)Content-Length:\r\n\r\n", 400, "invalid_content_length"),
    .init("CL only commas", "POST / HTTP/1.1\r\n\(host)Content-Length: ,\r\n\r\n", 400, "invalid_content_length"),
    .init("CL overflow", "POST / HTTP/1.1\r\n\(host)Content-Length: 9223372036854775808\r\n\r\n",
          400, "content_length_overflow"),
    .init("CL differing fields", "POST / HTTP/1.1\r\n\(host)Content-Length: 5\r\nContent-Length: 6\r\n\r\n",
          400, "conflicting_content_length"),
    .init("CL differing list", "POST / HTTP/1.1\r\n\(host)Content-Length: 5, 6\r\n\r\n", 400, "conflicting_content_length"),
    // Transfer-Encoding (RFC 9112 §6.1, §6.3)
    .init("CL and TE", "POST / HTTP/1.1\r\n\(host)Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
          400, "content_length_with_transfer_encoding"),
    .init("TE gzip", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip\r\n\r\n", 501, "unsupported_transfer_coding"),
    .init("TE gzip, chunked", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip, chunked\r\n\r\n",
          501, "unsupported_transfer_coding"),
    .init("TE gzip then chunked fields", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n",
          501, "unsupported_transfer_coding"),
    .init("TE chunked, chunked", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked, chunked\r\n\r\n",
          400, "chunked_repeated"),
    .init("TE chunked in two fields", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
          400, "chunked_repeated"),
    .init("TE chunked not last", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: chunked, gzip\r\n\r\n",
          400, "chunked_not_last"),
    .init("TE empty", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding:\r\n\r\n", 400, "invalid_transfer_encoding"),
    .init("TE not a token", "POST / HTTP/1.1\r\n\(host)Transfer-Encoding: \"chunked\"\r\n\r\n", 400, "invalid_transfer_encoding"),
    .init("TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "transfer_encoding_http10"),
    // Host (RFC 9112 §3.2, RFC 9110 §7.2)
    .init("HTTP/1.1 without Host", "GET / HTTP/1.1\r\nX: a\r\n\r\n", 400, "missing_host"),
    .init("two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, "multiple_host"),
    .init("two Hosts on HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400, "multiple_host"),
    .init("Host with userinfo", "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", 400, "invalid_host"),
    .init("Host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "invalid_host"),
    .init("Host with path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400, "invalid_host"),
    // Connection (RFC 9110 §7.6.1)
    .init("Connection not a token", "GET / HTTP/1.1\r\n\(host)Connection: close, \"x\"\r\n\r\n", 400, "invalid_connection"),
]

@Suite("Request head parser: every strictness rule")
struct RequestStrictnessTests {
    @Test(arguments: badRequests)
    func refused(_ testCase: BadRequestCase) {
        let result = parseRequest(testCase.input)
        #expect(result.error?.status == testCase.status, "\(testCase.name): \(result)")
        #expect(result.error?.reason == testCase.reason, "\(testCase.name): \(result)")
    }

    /// Each refused input differs from an accepted one only by the offending bytes, so the rules are what
    /// fails, not some unrelated part of the fixture.
    @Test func controlFixturesAreAccepted() {
        let accepted = [
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /a~b HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET / HTTP/1.1\r\nX: a\tb\r\nHost: a\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.0\r\nContent-Length: 1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: close, x\r\n\r\n",
        ]
        for text in accepted {
            #expect(parseRequest(text).head != nil, "\(text)")
        }
    }

    @Test func errorStatusesAndReasonsAreStable() {
        #expect(HTTPParseError.badRequest("x").status == 400)
        #expect(HTTPParseError.uriTooLong.status == 414)
        #expect(HTTPParseError.headersTooLarge("y").status == 431)
        #expect(HTTPParseError.bodyTooLarge.status == 413)
        #expect(HTTPParseError.notImplemented("z").status == 501)
        #expect(HTTPParseError.versionNotSupported.status == 505)
        #expect(HTTPParseError.uriTooLong.reason == "request_line_too_long")
        #expect(HTTPParseError.badRequest("bare_cr").description == "400 bare_cr")
    }

    /// Random mutations of valid requests: never a crash, and byte-by-byte always agrees with all-at-once.
    @Test func mutatedRequestsAgreeFedWholeOrByteByByte() {
        var random = SplitMix64(state: 0x5EED)
        let seeds = [
            "POST /v1/redeem?x=1 HTTP/1.1\r\nHost: api\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
            "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nX:  y \r\n\r\n",
        ]
        let interesting: [UInt8] = [0x00, 0x09, 0x0A, 0x0D, 0x20, 0x3A, 0x2C, 0x7F, 0x80, 0xFF, 0x41, 0x35]
        var outcomes: Set<Int> = []
        for iteration in 0..<300 {
            var input = bytes(seeds[iteration % seeds.count])
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let position = Int.random(in: 0..<input.count, using: &random)
                let byte = interesting.randomElement(using: &random) ?? 0
                switch Int.random(in: 0..<3, using: &random) {
                case 0: input[position] = byte
                case 1: input.insert(byte, at: position)
                default: input.remove(at: position)
                }
            }
            let limits = HTTPParserLimits(maxHeadBytes: 64, maxHeaders: 3, maxRequestLineBytes: 30)
            let result = parseRequest(input, limits: limits)
            outcomes.insert(result.error?.status ?? (result.head == nil ? 0 : 200))
        }
        // The mutations reach several different outcomes, so the comparison above is not vacuous.
        #expect(outcomes.count >= 3)
    }
}
