import Testing
@testable import HTTPWire

/// A malformed chunked body and the exact error it must produce.
struct BadChunkedCase: Sendable, CustomTestStringConvertible {
    var name: String
    var input: String
    var status: Int
    var reason: String
    init(_ name: String, _ input: String, _ status: Int, _ reason: String) {
        self.name = name
        self.input = input
        self.status = status
        self.reason = reason
    }
    var testDescription: String { name }
}

let badChunkedBodies: [BadChunkedCase] = [
    .init("empty size", "\r\n", 400, "invalid_chunk_size"),
    .init("non-hex size", "g\r\n", 400, "invalid_chunk_size"),
    .init("negative size", "-1\r\n", 400, "invalid_chunk_size"),
    .init("leading space", " 5\r\nhello\r\n0\r\n\r\n", 400, "invalid_chunk_size"),
    .init("0x prefix", "0x5\r\nhello\r\n", 400, "invalid_chunk_size"),
    .init("17 hex digits", "00000000000000001\r\nx\r\n", 400, "chunk_size_too_long"),
    .init("overflow", "8000000000000000\r\n", 400, "chunk_size_overflow"),
    .init("overflow all F", "FFFFFFFFFFFFFFFF\r\n", 400, "chunk_size_overflow"),
    .init("bare LF after size", "5\nhello\r\n0\r\n\r\n", 400, "bare_lf"),
    .init("bare CR after size", "5\rhello\r\n", 400, "bare_cr"),
    .init("data longer than size", "5\r\nhelloX\r\n0\r\n\r\n", 400, "missing_chunk_crlf"),
    .init("LF only after data", "5\r\nhello\n0\r\n\r\n", 400, "missing_chunk_crlf"),
    .init("CR only after data", "5\r\nhello\r0\r\n\r\n", 400, "missing_chunk_crlf"),
    .init("trailing whitespace after size", "5 \r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("empty extension", "5;\r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("extension without name", "5;=x\r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("extension without value", "5;a=\r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("extension name with space inside", "5;a b\r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("extension trailing whitespace", "5;a \r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("extension bad value char", "5;a=b@c\r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("unterminated quoted extension", "5;a=\"b\r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("NUL in extension", "5;a\u{0}\r\nhello\r\n", 400, "invalid_chunk_extension"),
    .init("bare LF in extension", "5;a=b\nhello\r\n", 400, "bare_lf"),
    .init("trailer obs-fold", "0\r\nA: 1\r\n b\r\n\r\n", 400, "obs_fold"),
    .init("trailer whitespace before colon", "0\r\nA : 1\r\n\r\n", 400, "whitespace_before_colon"),
    .init("trailer empty name", "0\r\n: 1\r\n\r\n", 400, "empty_field_name"),
    .init("trailer missing colon", "0\r\nA\r\n\r\n", 400, "missing_colon"),
    .init("trailer non-token name", "0\r\nA(: 1\r\n\r\n", 400, "invalid_field_name"),
    .init("trailer NUL in value", "0\r\nA: \u{0}\r\n\r\n", 400, "invalid_field_value"),
    .init("trailer bare LF", "0\r\nA: 1\n\r\n", 400, "bare_lf"),
    .init("trailer bare CR", "0\r\nA: 1\rB\r\n\r\n", 400, "bare_cr"),
    .init("final bare LF", "0\r\n\n", 400, "bare_lf"),
    .init("final CR without LF", "0\r\n\rX", 400, "bare_cr"),
]

@Suite("Chunked decoder")
struct ChunkedDecoderTests {
    @Test func multiChunkBody() {
        let body = "5\r\nhello\r\n6\r\n world\r\nA\r\n0123456789\r\n0\r\n\r\n"
        let outcome = decodeChunked(bytes(body))
        #expect(outcome.data == bytes("hello world0123456789"))
        #expect(outcome.result == .done(consumed: bytes(body).count))
        #expect(outcome.bodyBytesDecoded == 21)
    }

    @Test func bytesAfterTheBodyAreNotConsumed() {
        let body = "3\r\nabc\r\n0\r\n\r\n"
        let outcome = decodeChunked(bytes(body + "GET / HTTP/1.1\r\n"))
        #expect(outcome.data == bytes("abc"))
        #expect(outcome.result == .done(consumed: bytes(body).count))
    }

    /// The trailer section is kept, whole or byte by byte: names as sent, values OWS-trimmed.
    @Test func trailersAreKept() {
        let body = bytes("3\r\nabc\r\n0\r\nX-One: 1\r\ngrpc-status:\t0 \r\n\r\n")
        var whole = ChunkedDecoder()
        _ = body.withUnsafeBytes { whole.decode($0) { _ in } }
        var split = ChunkedDecoder()
        for b in body { _ = [b].withUnsafeBytes { split.decode($0) { _ in } } }
        for decoder in [whole, split] {
            let t = decoder.takeTrailers()
            #expect(t.map { h in (0..<h.count).map { "\(h.name(at: $0))=\(h.value(at: $0))" } } == ["X-One=1", "grpc-status=0"])
        }
        var none = ChunkedDecoder()
        _ = bytes("0\r\n\r\n").withUnsafeBytes { none.decode($0) { _ in } }
        #expect(none.takeTrailers() == nil)
    }

    @Test func emptyBody() {
        #expect(decodeChunked(bytes("0\r\n\r\n")) == ChunkedOutcome(data: [], result: .done(consumed: 5), bodyBytesDecoded: 0))
    }

    @Test func hexCaseAndLeadingZeros() {
        let data = String(repeating: "x", count: 0x1f)
        #expect(decodeChunked(bytes("1f\r\n\(data)\r\n0\r\n\r\n")).data.count == 31)
        #expect(decodeChunked(bytes("1F\r\n\(data)\r\n0\r\n\r\n")).data.count == 31)
        #expect(decodeChunked(bytes("000000000000001F\r\n\(data)\r\n0000\r\n\r\n")).data.count == 31)
    }

    @Test func largestSizeIsAcceptedAsASize() {
        let outcome = decodeChunked(bytes("7FFFFFFFFFFFFFFF\r\nab"))
        #expect(outcome.result == .consumed(20))
        #expect(outcome.data == bytes("ab"))
    }

    @Test func incompleteBodyNeedsMore() {
        let outcome = decodeChunked(bytes("5\r\nhel"))
        #expect(outcome.result == .consumed(6))
        #expect(outcome.data == bytes("hel"))
        #expect(decodeChunked(bytes("0\r\nX: 1\r\n")).result == .consumed(9))
    }

    @Test func extensionsAreAcceptedAndIgnored() {
        let body = "5;name\r\nhello\r\n5 ; a = b ;c=\"q \\\" ;x\"\r\nworld\r\n3;x=1;y;z=\"\"\r\n!!!\r\n0;last\r\n\r\n"
        let outcome = decodeChunked(bytes(body))
        #expect(outcome.data == bytes("helloworld!!!"))
        #expect(outcome.result == .done(consumed: bytes(body).count))
    }

    @Test func extensionLengthLimitBoundary() {
        let limits = HTTPParserLimits(maxChunkExtensionBytes: 10)
        let atLimit = ";abcdefghi" // 10 bytes
        #expect(atLimit.utf8.count == 10)
        let accepted = decodeChunked(bytes("1\(atLimit)\r\nx\r\n0\r\n\r\n"), limits: limits)
        #expect(accepted.data == bytes("x"))
        #expect(accepted.result == .done(consumed: 21))
        let over = decodeChunked(bytes("1\(atLimit)j\r\nx\r\n0\r\n\r\n"), limits: limits)
        #expect(over.result == .failure(.badRequest("chunk_extension_too_long")))
        // The bound is per chunk line, not per body.
        let twoLines = decodeChunked(bytes("1\(atLimit)\r\nx\r\n1\(atLimit)\r\ny\r\n0\r\n\r\n"), limits: limits)
        #expect(twoLines.data == bytes("xy"))
    }

    @Test func trailersAreReadAndDiscarded() {
        let body = "2\r\nhi\r\n0\r\nX-Checksum: abc\r\nX-Other:\t v \r\n\r\n"
        let outcome = decodeChunked(bytes(body + "NEXT"))
        #expect(outcome.data == bytes("hi"))
        #expect(outcome.result == .done(consumed: bytes(body).count))
    }

    @Test func trailerLimits() {
        let limits = HTTPParserLimits(maxHeadBytes: 20, maxHeaders: 2)
        // Trailer section "A: 1\r\nB: 2\r\n\r\n" is 14 bytes, two fields.
        #expect(decodeChunked(bytes("0\r\nA: 1\r\nB: 2\r\n\r\n"), limits: limits).result == .done(consumed: 17))
        #expect(decodeChunked(bytes("0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"), limits: limits).result
                == .failure(.headersTooLarge("too_many_trailers")))
        // Exactly 20 bytes of trailer section pass, 21 fail.
        let twenty = "A: 1234567890123\r\n\r\n"
        #expect(twenty.utf8.count == 20)
        #expect(decodeChunked(bytes("0\r\n" + twenty), limits: limits).result == .done(consumed: 23))
        #expect(decodeChunked(bytes("0\r\nA: 12345678901234\r\n\r\n"), limits: limits).result
                == .failure(.headersTooLarge("trailers_too_large")))
    }

    @Test func bodyLimitBoundary() {
        let exact = decodeChunked(bytes("4\r\nabcd\r\n6\r\nefghij\r\n0\r\n\r\n"), maxBodyBytes: 10)
        #expect(exact.data.count == 10)
        #expect(exact.bodyBytesDecoded == 10)
        if case .done = exact.result {} else { Issue.record("expected done, got \(exact.result)") }
        let over = decodeChunked(bytes("4\r\nabcd\r\n7\r\nefghijk\r\n0\r\n\r\n"), maxBodyBytes: 10)
        #expect(over.result == .failure(.bodyTooLarge))
        #expect(over.result == .failure(.bodyTooLarge) && over.data == bytes("abcd"), "no data of the over-long chunk")
    }

    @Test(arguments: badChunkedBodies)
    func refused(_ testCase: BadChunkedCase) {
        let outcome = decodeChunked(bytes(testCase.input))
        guard case .failure(let error) = outcome.result else {
            Issue.record("\(testCase.name): expected failure, got \(outcome.result)")
            return
        }
        #expect(error.status == testCase.status, "\(testCase.name)")
        #expect(error.reason == testCase.reason, "\(testCase.name)")
    }

    @Test func dataSlicesPointIntoTheInput() {
        var decoder = ChunkedDecoder()
        let input = bytes("5\r\nhello\r\n0\r\n\r\n")
        var pointsInside = false
        input.withUnsafeBytes { raw in
            _ = decoder.decode(raw) { slice in
                if let base = raw.baseAddress, let start = slice.baseAddress {
                    pointsInside = start == base + 3 && slice.count == 5
                }
            }
        }
        #expect(pointsInside)
    }

    @Test func afterDoneOrFailureTheOutcomeRepeats() {
        var decoder = ChunkedDecoder()
        let done = bytes("0\r\n\r\n").withUnsafeBytes { decoder.decode($0) { _ in } }
        #expect(done == .done(consumed: 5))
        #expect(decoder.isDone)
        #expect(bytes("5\r\n").withUnsafeBytes { decoder.decode($0) { _ in } } == .done(consumed: 0))
        var failing = ChunkedDecoder()
        #expect(bytes("x").withUnsafeBytes { failing.decode($0) { _ in } } == .failure(.badRequest("invalid_chunk_size")))
        #expect(bytes("5\r\n").withUnsafeBytes { failing.decode($0) { _ in } } == .failure(.badRequest("invalid_chunk_size")))
        failing.reset()
        #expect(bytes("0\r\n\r\n").withUnsafeBytes { failing.decode($0) { _ in } } == .done(consumed: 5))
    }

    /// Every split size gives the same data and result as one call.
    @Test func anySplitGivesTheSameOutcome() {
        let body = bytes("5;e=\"v\"\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nT: x\r\n\r\nrest")
        let whole = decodeChunked(body)
        #expect(whole.result == .done(consumed: body.count - 4))
        for sizes in [[2], [3], [5, 1], [7, 2, 1], [16], [100]] {
            #expect(decodeInPieces(body, sizes: sizes) == whole, "sizes \(sizes)")
        }
    }

    /// Random mutations: never a crash, byte-by-byte always agrees with all-at-once.
    @Test func mutatedBodiesAgreeWholeOrByteByByte() {
        var random = SplitMix64(state: 0xC0FFEE)
        let seed = bytes("5;a=b\r\nhello\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\n")
        let interesting: [UInt8] = [0x00, 0x09, 0x0A, 0x0D, 0x20, 0x3B, 0x3D, 0x22, 0x5C, 0x3A, 0x30, 0x46, 0x80]
        var kinds: Set<String> = []
        for _ in 0..<300 {
            var input = seed
            let position = Int.random(in: 0..<input.count, using: &random)
            let byte = interesting.randomElement(using: &random) ?? 0
            if Bool.random(using: &random) { input[position] = byte } else { input.insert(byte, at: position) }
            let outcome = decodeChunked(input, limits: HTTPParserLimits(maxHeadBytes: 12, maxChunkExtensionBytes: 6))
            switch outcome.result {
            case .consumed: kinds.insert("more")
            case .done: kinds.insert("done")
            case .failure(let error): kinds.insert(error.reason)
            }
        }
        #expect(kinds.count >= 4)
    }
}
