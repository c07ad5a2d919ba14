import Testing
@testable import HTTPWire

@Suite("Limits at their boundary")
struct LimitTests {
    /// A request line of exactly `length` bytes (CRLF excluded).
    private func requestLine(length: Int) -> String {
        let fixed = "GET / HTTP/1.1".utf8.count
        return "GET /" + String(repeating: "a", count: length - fixed) + " HTTP/1.1"
    }

    @Test func requestLineExactlyAtLimitPassesOneOverIs414() {
        let limits = HTTPParserLimits(maxRequestLineBytes: 40)
        let atLimit = requestLine(length: 40)
        #expect(atLimit.utf8.count == 40)
        #expect(parseRequest(atLimit + "\r\nHost: a\r\n\r\n", limits: limits).head != nil)
        let over = parseRequest(requestLine(length: 41) + "\r\nHost: a\r\n\r\n", limits: limits)
        #expect(over.error == .uriTooLong)
        #expect(over.error?.status == 414)
    }

    @Test func requestLineTooLongFailsBeforeItsEndArrives() {
        let limits = HTTPParserLimits(maxRequestLineBytes: 40)
        let line = bytes(requestLine(length: 60))
        #expect(parseRequest(Array(line.prefix(40)), limits: limits) == .needMore)
        #expect(parseRequest(Array(line.prefix(41)), limits: limits).error?.status == 414)
    }

    @Test func requestLineLimitNeverExceedsHeadLimit() {
        let limits = HTTPParserLimits(maxHeadBytes: 30, maxRequestLineBytes: 8192)
        #expect(limits.effectiveRequestLineBytes == 30)
        #expect(parseRequest(Array(bytes(requestLine(length: 31)).prefix(31)), limits: limits).error?.status == 414)
    }

    /// A complete head of exactly `length` bytes, padded in one field value.
    private func head(length: Int) -> String {
        let skeleton = "GET / HTTP/1.1\r\nHost: a\r\nX: \r\n\r\n"
        let padding = length - skeleton.utf8.count
        return "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "p", count: padding) + "\r\n\r\n"
    }

    @Test func headExactlyAtLimitPassesOneOverIs431() {
        let limits = HTTPParserLimits(maxHeadBytes: 64)
        let atLimit = head(length: 64)
        #expect(atLimit.utf8.count == 64)
        let accepted = parseRequest(atLimit, limits: limits)
        if case .complete(_, let consumed) = accepted {
            #expect(consumed == 64)
        } else {
            Issue.record("expected complete, got \(accepted)")
        }
        let over = parseRequest(head(length: 65), limits: limits)
        #expect(over.error == .headersTooLarge("head_too_large"))
        #expect(over.error?.status == 431)
    }

    @Test func headWithoutEndFailsAsSoonAsItPassesTheLimit() {
        let limits = HTTPParserLimits(maxHeadBytes: 64)
        let endless = bytes("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "p", count: 200))
        #expect(parseRequest(Array(endless.prefix(64)), limits: limits) == .needMore)
        #expect(parseRequest(Array(endless.prefix(65)), limits: limits).error?.status == 431)
    }

    @Test func leadingEmptyLinesDoNotCountTowardsTheHeadLimit() {
        let limits = HTTPParserLimits(maxHeadBytes: 64)
        #expect(parseRequest("\r\n\r\n" + head(length: 64), limits: limits).head != nil)
    }

    private func request(fields: Int) -> String {
        "GET / HTTP/1.1\r\nHost: a\r\n" + (1..<fields).map { "X-\($0): v\r\n" }.joined() + "\r\n"
    }

    @Test func maxHeadersExactlyPassesOneMoreIs431() {
        let limits = HTTPParserLimits(maxHeaders: 5)
        #expect(parseRequest(request(fields: 5), limits: limits).head?.headers.count == 5)
        let over = parseRequest(request(fields: 6), limits: limits)
        #expect(over.error == .headersTooLarge("too_many_headers"))
        #expect(over.error?.status == 431)
    }

    @Test func defaultLimitsMatchTheSpec() {
        let limits = HTTPParserLimits.default
        #expect(limits.maxHeadBytes == 16 * 1024)
        #expect(limits.maxHeaders == 100)
        #expect(limits.maxRequestLineBytes == 8 * 1024)
        #expect(parseRequest(request(fields: 100)).head?.headers.count == 100)
        #expect(parseRequest(request(fields: 101)).error?.status == 431)
    }

    @Test func defaultHeadLimitBoundary() {
        #expect(parseRequest(head(length: 16 * 1024)).head != nil)
        #expect(parseRequest(head(length: 16 * 1024 + 1)).error?.status == 431)
    }

    @Test func statusLineLimitForResponses() {
        let limits = HTTPParserLimits(maxRequestLineBytes: 20)
        let atLimit = "HTTP/1.1 200 " + String(repeating: "r", count: 7)
        #expect(atLimit.utf8.count == 20)
        #expect(parseResponse(atLimit + "\r\n\r\n", limits: limits).head?.status == 200)
        let over = parseResponse(atLimit + "r\r\n\r\n", limits: limits)
        #expect(over.error == .headersTooLarge("status_line_too_long"))
    }

    @Test func responseHeadAndFieldLimits() {
        let limits = HTTPParserLimits(maxHeadBytes: 40, maxHeaders: 2)
        let base = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n" // 31 bytes
        #expect(parseResponse(base, limits: limits).head != nil)
        #expect(parseResponse("HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits: limits).error
                == .headersTooLarge("too_many_headers"))
        let padded = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2" + String(repeating: "x", count: 9) + "\r\n\r\n"
        #expect(padded.utf8.count == 40)
        #expect(parseResponse(padded, limits: limits).head != nil)
        let over = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2" + String(repeating: "x", count: 10) + "\r\n\r\n"
        #expect(parseResponse(over, limits: limits).error?.status == 431)
    }
}
