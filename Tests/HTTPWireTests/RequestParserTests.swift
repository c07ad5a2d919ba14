import Testing
@testable import HTTPWire

@Suite("Request head parser: valid requests")
struct RequestParserTests {
    @Test func getWithSeveralHeaders() throws {
        let text = "GET /v1/items?id=7 HTTP/1.1\r\nHost: api.example.com:8080\r\nUser-Agent: MyApp/1.2\r\n"
            + "Accept:   */*  \t\r\nX-Empty:\r\nX-Multi: a\r\nx-multi: b\r\n\r\n"
        let result = parseRequest(text)
        guard case .complete(let head, let consumed) = result else {
            Issue.record("expected complete, got \(result)")
            return
        }
        #expect(consumed == bytes(text).count)
        #expect(head.method == "GET")
        #expect(head.target == "/v1/items?id=7")
        #expect(head.versionMinor == 1)
        #expect(head.host == "api.example.com:8080")
        #expect(head.framing == .none)
        #expect(head.keepAlive)
        #expect(!head.expectContinue)
        #expect(head.connectionTokens.isEmpty)
        #expect(head.headers.count == 6)
        #expect(head.headers.name(at: 1) == "User-Agent")
        #expect(head.headers.value(at: 1) == "MyApp/1.2")
        #expect(head.headers.value(at: 2) == "*/*")
        #expect(head.headers.value(at: 3) == "")
        #expect(head.headers.nameEquals(at: 1, "user-agent"))
        #expect(!head.headers.nameEquals(at: 1, "user-agen"))
        #expect(head.headers.firstValue(forLowercased: "x-multi") == "a")
        #expect(head.headers.indices(forLowercased: "x-multi") == [4, 5])
        #expect(head.headers.firstValue(forLowercased: "absent") == nil)
    }

    @Test func postWithContentLengthLeavesBodyUnconsumed() {
        let headText = "POST /v1/redeem HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\n"
        let result = parseRequest(bytes(headText + "hello"))
        #expect(result.head?.method == "POST")
        #expect(result.head?.framing == .contentLength(5))
        if case .complete(_, let consumed) = result {
            #expect(consumed == bytes(headText).count)
        } else {
            Issue.record("expected complete, got \(result)")
        }
    }

    @Test func headRequest() {
        let result = parseRequest("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(result.head?.method == "HEAD")
        #expect(result.head?.target == "/")
        #expect(result.head?.framing == RequestBodyFraming.none)
    }

    @Test func chunkedRequest() {
        let result = parseRequest("POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n")
        #expect(result.head?.framing == .chunked)
    }

    @Test func chunkedSplitOverTwoFieldsIsStillOneChunked() {
        let result = parseRequest("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(result.head?.framing == .chunked)
    }

    @Test func pipelinedRequestsInOneBuffer() throws {
        let first = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n"
        let second = "GET /b HTTP/1.1\r\nHost: b\r\n\r\n"
        let third = "HEAD /c HTTP/1.1\r\nHost: c\r\n\r\n"
        let buffer = bytes(first + "abc" + second + third)
        var parser = HTTPRequestHeadParser()
        var offset = 0
        var seen: [(String, String)] = []
        try buffer.withUnsafeBytes { raw in
            while offset < raw.count {
                let result = parser.parse(UnsafeRawBufferPointer(rebasing: raw[offset...]))
                guard case .complete(let head, let consumed) = result else {
                    Issue.record("expected complete at \(offset), got \(result)")
                    return
                }
                seen.append((head.method, head.target))
                offset += consumed
                if case .contentLength(let length) = head.framing { offset += Int(length) }
                try #require(seen.count <= 3)
            }
        }
        #expect(seen.map(\.0) == ["POST", "GET", "HEAD"])
        #expect(seen.map(\.1) == ["/a", "/b", "/c"])
        #expect(offset == buffer.count)
    }

    @Test func firstOfTwoPipelinedReportsItsOwnLength() throws {
        let first = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"
        let result = parseRequest(first + "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
        let alone = try #require(parseRequest(first).head)
        #expect(result == .complete(alone, consumed: bytes(first).count))
    }

    @Test func incompleteHeadNeedsMore() {
        #expect(parseRequest("GET / HTTP/1.1\r\nHost: a\r\n") == .needMore)
        #expect(parseRequest("GET / HTTP/1.1\r\nHost: a\r\n\r") == .needMore)
        #expect(parseRequest("") == .needMore)
    }

    @Test func http10DefaultsAndKeepAlive() {
        let plain = parseRequest("GET / HTTP/1.0\r\n\r\n")
        #expect(plain.head?.versionMinor == 0)
        #expect(plain.head?.keepAlive == false)
        #expect(plain.head?.host == nil)
        let kept = parseRequest("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
        #expect(kept.head?.keepAlive == true)
        #expect(kept.head?.connectionTokens == ["keep-alive"])
        let both = parseRequest("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n")
        #expect(both.head?.keepAlive == false)
    }

    @Test func http11ConnectionCloseAndTokens() {
        let result = parseRequest("GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Foo ,  CLOSE\r\nConnection: upgrade\r\n\r\n")
        #expect(result.head?.keepAlive == false)
        #expect(result.head?.connectionTokens == ["x-foo", "close", "upgrade"])
    }

    @Test func expectContinueOnlyOnHTTP11() {
        let v11 = parseRequest("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n")
        #expect(v11.head?.expectContinue == true)
        let v10 = parseRequest("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n")
        #expect(v10.head?.expectContinue == false)
        let other = parseRequest("POST / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n")
        #expect(other.head?.expectContinue == false)
    }

    @Test func leadingEmptyLinesAreSkippedAndCounted() {
        let text = "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"
        let result = parseRequest(text)
        if case .complete(let head, let consumed) = result {
            #expect(consumed == bytes(text).count)
            #expect(head.headers.bytes.first == UInt8(ascii: "G"))
        } else {
            Issue.record("expected complete, got \(result)")
        }
        let tooMany = String(repeating: "\r\n", count: 5) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        #expect(parseRequest(tooMany).error == .badRequest("too_many_leading_empty_lines"))
        let atLimit = String(repeating: "\r\n", count: 4) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        #expect(parseRequest(atLimit).head != nil)
    }

    @Test func lowercaseMethodIsATokenAndAccepted() {
        #expect(parseRequest("get / HTTP/1.1\r\nHost: a\r\n\r\n").head?.method == "get")
    }

    @Test func absoluteFormAndAsteriskTargetsAreKeptRaw() {
        #expect(parseRequest("GET http://x/y?z HTTP/1.1\r\nHost: x\r\n\r\n").head?.target == "http://x/y?z")
        #expect(parseRequest("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n").head?.target == "*")
    }

    @Test func emptyHostIsAllowed() {
        #expect(parseRequest("GET / HTTP/1.1\r\nHost:\r\n\r\n").head?.host == "")
    }

    @Test func contentLengthRepeatsWithSameValueAccepted() {
        #expect(parseRequest("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n").head?.framing == .contentLength(5))
        #expect(parseRequest("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\ncontent-length: 7\r\n\r\n").head?.framing
                == .contentLength(7))
        #expect(parseRequest("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").head?.framing == .contentLength(0))
        #expect(parseRequest("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n").head?.framing
                == .contentLength(Int64.max))
    }

    @Test func failureIsStickyUntilReset() {
        var parser = HTTPRequestHeadParser()
        let bad = bytes("GET / HTTP/1.1\nHost: a\r\n\r\n")
        let good = bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(bad.withUnsafeBytes { parser.parse($0) }.error?.status == 400)
        #expect(good.withUnsafeBytes { parser.parse($0) }.error?.status == 400)
        parser.reset()
        #expect(good.withUnsafeBytes { parser.parse($0) }.head?.target == "/")
    }

    @Test func shorterBufferThanBeforeRestartsInsteadOfCrashing() {
        var parser = HTTPRequestHeadParser()
        let long = bytes("GET /abcdef HTTP/1.1\r\nHost: a\r\n")
        #expect(long.withUnsafeBytes { parser.parse($0) } == .needMore)
        let short = bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(Array(short.prefix(5)).withUnsafeBytes { parser.parse($0) } == .needMore)
        #expect(short.withUnsafeBytes { parser.parse($0) }.head?.target == "/")
    }

    /// The parser reuses its storage for the next head only once the previous head is gone: a head kept alive (an
    /// exchange still holding it, a pipelined request) keeps its own bytes, fields and host.
    @Test func aHeadKeptAliveIsUnchangedByTheNextOnes() throws {
        let large = "GET /big HTTP/1.1\r\nHost: big\r\nX-Pad: " + String(repeating: "p", count: 3000) + "\r\n\r\n"
        let texts = ["GET /1 HTTP/1.1\r\nHost: one\r\nX-A: a\r\n\r\n", "PUT /22 HTTP/1.1\r\nHost: two.example\r\n\r\n",
                     large, "DELETE /3 HTTP/1.0\r\nX-B: b\r\nX-C: c\r\n\r\n", "OPTIONS * HTTP/1.1\r\nhost: four\r\n\r\n"]
        var parser = HTTPRequestHeadParser()
        var kept: [HTTPRequestHead] = []
        for text in texts {
            let head = try #require(bytes(text).withUnsafeBytes { parser.parse($0) }.head)
            #expect(head == parseRequest(text).head)
            kept.append(head)
        }
        for (text, head) in zip(texts, kept) {
            #expect(head.headers.bytes == bytes(text))
            #expect(head == parseRequest(text).head)
        }
        #expect(kept.map(\.method) == ["GET", "PUT", "GET", "DELETE", "OPTIONS"])
        #expect(kept.map(\.host) == ["one", "two.example", "big", nil, "four"])
        #expect(kept[0].headers.value(at: 1) == "a" && kept[3].headers.value(at: 1) == "c")
        // One at a time (each head dropped before the next, so the storage is reused in place): the same heads.
        for text in texts + texts.reversed() {
            let head = try #require(bytes(text).withUnsafeBytes { parser.parse($0) }.head)
            #expect(head.headers.bytes == bytes(text))
            #expect(head == parseRequest(text).head)
        }
    }

    @Test func commonAndUncommonMethodsKeepTheirExactText() {
        for method in ["GET", "PUT", "POST", "HEAD", "PATCH", "DELETE", "OPTIONS", "GETS", "GEt", "get", "Post",
                       "PROPFIND", "CONNECT", "TRACE", "PUX", "OPTIONZ"] {
            let target = method == "CONNECT" ? "example.com:443" : "/"
            #expect(parseRequest("\(method) \(target) HTTP/1.1\r\nHost: a\r\n\r\n").head?.method == method)
        }
    }

    @Test func headersBytesAreACopyOfTheHeadOnly() {
        let text = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
        let head = parseRequest(text + "trailing").head
        #expect(head?.headers.bytes == bytes(text))
    }
}
