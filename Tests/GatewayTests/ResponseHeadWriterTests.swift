import EventLoop
@testable import Gateway
import ProxyCore
import HTTPWire
import Testing

/// The HTTP/1.1 response head writer copies forwarded field lines in runs of the upstream's own bytes
/// (`ResponseHeaderFilter.forEachRun`): what it writes must be exactly the filter's lines, each followed by CRLF.
struct ResponseHeadWriterTests {
    private static func parse(_ text: String) -> HTTPResponseHead? {
        var parser = HTTPResponseHeadParser()
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw -> HTTPResponseHead? in
            if case .complete(let head, _) = parser.parse(raw) { return head }
            return nil
        }
    }

    /// The head as the per-line filter gives it (the writer's output before the runs).
    private static func expectedFields(_ head: HTTPResponseHead, framing: ResponseBodyFraming) -> String {
        var text = ""
        ResponseHeaderFilter.forEach(head, framing: framing) { _, _, line in
            text += String(decoding: line, as: UTF8.self) + "\r\n"
        }
        return text
    }

    @Test(arguments: [
        // nginx's usual head: the first three lines are one run, the two after dropped.
        "HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sat, 28 Nov 2026 20:00:00 GMT\r\nContent-Type: text/plain\r\n"
            + "Content-Length: 3\r\nConnection: keep-alive\r\n\r\n",
        // Trailing whitespace (not forwarded), dropped lines between forwarded ones, a field listed in Connection.
        "HTTP/1.1 200 OK\r\nA: 1 \t\r\nB: 2\r\nConnection: x-drop, keep-alive\r\nC:3\r\nX-Drop: y\r\nD:  4\r\n"
            + "Transfer-Encoding: chunked\r\nE: 5\t\r\nF: \r\nG: 7\r\n\r\n",
        // A response without a body keeps its Content-Length; an upstream X-Request-Id is replaced.
        "HTTP/1.1 304 Not Modified\r\nX-Request-Id: theirs\r\nContent-Length: 10\r\nETag: \"e\"\r\n\r\n",
        // Nothing to forward.
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
    ])
    func fieldsAreTheFiltersLines(_ text: String) throws {
        let head = try #require(Self.parse(text))
        let framing = head.framing(requestMethod: "GET")
        let out = IOBuffer(capacity: 0)
        var responseFraming = ClientResponseFraming.pending
        var close = false
        let id = RequestID(bits: (1, 2))
        ResponseHeadWriter.write(head, framing: framing, into: out, requestId: id, responseFraming: &responseFraming,
                                 clientVersionMinor: 1, closeAfterResponse: &close)
        let written = String(decoding: out.readable, as: UTF8.self)
        let statusLineEnd = try #require(written.range(of: "\r\n"))
        let fields = String(written[statusLineEnd.upperBound...])
        let expected = Self.expectedFields(head, framing: framing) + "X-Request-Id: " + id.string + "\r\n"
        #expect(fields.hasPrefix(expected))
        #expect(written.hasSuffix("\r\n\r\n"))
    }
}
