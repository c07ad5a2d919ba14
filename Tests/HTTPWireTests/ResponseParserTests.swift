import Testing
@testable import HTTPWire

/// A response head, a request method, and the framing RFC 9112 §6.3 gives it.
struct FramingCase: Sendable, CustomTestStringConvertible {
    var head: String
    var method: String
    var expected: ResponseBodyFraming
    var testDescription: String { "\(method) → \(head.prefix(12))… = \(expected)" }
}

let framingTable: [FramingCase] = [
    .init(head: "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", method: "GET", expected: .contentLength(12)),
    .init(head: "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", method: "HEAD", expected: .none),
    .init(head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", method: "GET", expected: .chunked),
    .init(head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", method: "HEAD", expected: .none),
    .init(head: "HTTP/1.1 200 OK\r\n\r\n", method: "GET", expected: .untilClose),
    .init(head: "HTTP/1.0 200 OK\r\n\r\n", method: "POST", expected: .untilClose),
    .init(head: "HTTP/1.1 204 No Content\r\n\r\n", method: "GET", expected: .none),
    .init(head: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", method: "DELETE", expected: .none),
    .init(head: "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", method: "GET", expected: .none),
    .init(head: "HTTP/1.1 100 Continue\r\n\r\n", method: "POST", expected: .none),
    .init(head: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", method: "GET", expected: .none),
    .init(head: "HTTP/1.1 200 OK\r\n\r\n", method: "CONNECT", expected: .none),
    .init(head: "HTTP/1.1 407 Auth\r\nContent-Length: 3\r\n\r\n", method: "CONNECT", expected: .contentLength(3)),
    .init(head: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", method: "GET", expected: .contentLength(0)),
    .init(head: "HTTP/1.1 500 Oops\r\nTransfer-Encoding: CHUNKED\r\n\r\n", method: "POST", expected: .chunked),
    .init(head: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n", method: "head", expected: .contentLength(4)),
]

let badResponses: [BadRequestCase] = [
    .init("HTTP/2.0", "HTTP/2.0 200 OK\r\n\r\n", 505, "http_version_not_supported"),
    .init("lower-case version", "http/1.1 200 OK\r\n\r\n", 400, "invalid_http_version"),
    .init("short status line", "HTTP/1.1 20\r\n\r\n", 400, "invalid_status_line"),
    .init("no space after version", "HTTP/1.1_200 OK\r\n\r\n", 400, "invalid_status_line"),
    .init("four-digit status", "HTTP/1.1 2000 OK\r\n\r\n", 400, "invalid_status_line"),
    .init("status 099", "HTTP/1.1 099 Low\r\n\r\n", 400, "invalid_status_code"),
    .init("status 600", "HTTP/1.1 600 High\r\n\r\n", 400, "invalid_status_code"),
    .init("status with letter", "HTTP/1.1 2x0 OK\r\n\r\n", 400, "invalid_status_code"),
    .init("control byte in reason", "HTTP/1.1 200 O\u{1}K\r\n\r\n", 400, "invalid_reason_phrase"),
    .init("leading empty line", "\r\nHTTP/1.1 200 OK\r\n\r\n", 400, "invalid_status_line"),
    .init("bare LF", "HTTP/1.1 200 OK\nContent-Length: 1\r\n\r\n", 400, "bare_lf"),
    .init("bare CR", "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", 400, "bare_cr"),
    .init("obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", 400, "obs_fold"),
    .init("whitespace before colon", "HTTP/1.1 200 OK\r\nX : a\r\n\r\n", 400, "whitespace_before_colon"),
    .init("NUL in value", "HTTP/1.1 200 OK\r\nX: \u{0}\r\n\r\n", 400, "invalid_field_value"),
    .init("bad Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n\r\n", 400, "invalid_content_length"),
    .init("differing Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
          400, "conflicting_content_length"),
    .init("CL and TE", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
          400, "content_length_with_transfer_encoding"),
    .init("TE gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "unsupported_transfer_coding"),
    .init("TE chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400, "chunked_repeated"),
    .init("TE on HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "transfer_encoding_http10"),
]

@Suite("Response head parser")
struct ResponseParserTests {
    @Test func okWithHeaders() {
        let text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: X-Trace\r\n\r\n"
        let result = parseResponse(text + "{}")
        guard case .complete(let head, let consumed) = result else {
            Issue.record("expected complete, got \(result)")
            return
        }
        #expect(consumed == bytes(text).count)
        #expect(head.status == 200)
        #expect(head.reason == "OK")
        #expect(head.versionMinor == 1)
        #expect(head.contentLength == 2)
        #expect(!head.isChunked)
        #expect(head.keepAlive)
        #expect(head.connectionTokens == ["x-trace"])
        #expect(head.headers.firstValue(forLowercased: "content-type") == "application/json")
        #expect(head.framing(requestMethod: "GET") == .contentLength(2))
    }

    @Test func reasonPhraseMayBeEmptyOrContainSpaces() {
        #expect(parseResponse("HTTP/1.1 204 \r\n\r\n").head?.reason == "")
        #expect(parseResponse("HTTP/1.1 204\r\n\r\n").head?.reason == "")
        #expect(parseResponse("HTTP/1.1 404 Not  Found\t!\r\n\r\n").head?.reason == "Not  Found\t!")
    }

    @Test func keepAliveRules() {
        #expect(parseResponse("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n").head?.keepAlive == false)
        #expect(parseResponse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").head?.keepAlive == false)
        #expect(parseResponse("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n").head?.keepAlive == true)
    }

    @Test func informationalHeadThenFinalHead() throws {
        let interim = "HTTP/1.1 100 Continue\r\n\r\n"
        let final = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"
        let buffer = bytes(interim + final)
        var parser = HTTPResponseHeadParser()
        let first = buffer.withUnsafeBytes { parser.parse($0) }
        guard case .complete(let head100, let consumed) = first else {
            Issue.record("expected complete, got \(first)")
            return
        }
        #expect(head100.status == 100)
        #expect(head100.isInformational)
        #expect(consumed == bytes(interim).count)
        let second = buffer.withUnsafeBytes { parser.parse(UnsafeRawBufferPointer(rebasing: $0[consumed...])) }
        let head201 = try #require(second.head)
        #expect(head201.status == 201)
        #expect(!head201.isInformational)
    }

    @Test func aResponseHeadKeptAliveIsUnchangedByTheNextOnes() throws {
        let texts = ["HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: a\r\n\r\n", "HTTP/1.1 404 Not Found\r\nServer: s\r\n\r\n",
                     "HTTP/1.1 204 No Content\r\n\r\n"]
        var parser = HTTPResponseHeadParser()
        var kept: [HTTPResponseHead] = []
        for text in texts {
            let head = try #require(bytes(text).withUnsafeBytes { parser.parse($0) }.head)
            kept.append(head)
        }
        for (text, head) in zip(texts, kept) {
            #expect(head.headers.bytes == bytes(text))
            #expect(head == parseResponse(text).head)
        }
        #expect(kept.map(\.reason) == ["OK", "Not Found", "No Content"])
    }

    @Test(arguments: framingTable)
    func framing(_ testCase: FramingCase) throws {
        let head = try #require(parseResponse(testCase.head).head)
        #expect(head.framing(requestMethod: testCase.method) == testCase.expected)
    }

    @Test(arguments: badResponses)
    func refused(_ testCase: BadRequestCase) {
        let result = parseResponse(testCase.input)
        #expect(result.error?.status == testCase.status, "\(testCase.name): \(result)")
        #expect(result.error?.reason == testCase.reason, "\(testCase.name): \(result)")
    }

    @Test func incompleteResponseNeedsMore() {
        #expect(parseResponse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n") == .needMore)
    }
}

/// The reason phrase stays the upstream's bytes (obs-text included), read from the head's own copy of them.
@Suite struct ReasonPhraseBytesTests {
    @Test func reasonPhraseBytesAreKeptExactly() throws {
        let input = bytes("HTTP/1.1 299 ") + [0x4F, 0x6B, 0x20, 0xE9, 0xFF, 0x80] + bytes("\r\nContent-Length: 0\r\n\r\n")
        let head = try #require(parseResponse(input).head)
        #expect(head.status == 299)
        #expect(head.withReasonBytes { Array($0) } == [0x4F, 0x6B, 0x20, 0xE9, 0xFF, 0x80])
        let empty = try #require(parseResponse("HTTP/1.1 204\r\n\r\n").head)
        #expect(empty.withReasonBytes { $0.count } == 0)
        #expect(empty.reason == "")
        #expect(try #require(parseResponse("HTTP/1.1 404 Not Found\r\n\r\n").head).reason == "Not Found")
    }
}
