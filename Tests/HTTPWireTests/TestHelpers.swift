import Testing
@testable import HTTPWire

/// Bytes of a message written with `\r\n` spelled out.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Parses a request all at once and byte by byte; both must agree.
func parseRequest(
    _ input: [UInt8], limits: HTTPParserLimits = .default, sourceLocation: SourceLocation = #_sourceLocation
) -> HeadParseResult<HTTPRequestHead> {
    var whole = HTTPRequestHeadParser(limits: limits)
    let allAtOnce = input.withUnsafeBytes { whole.parse($0) }
    var incremental = HTTPRequestHeadParser(limits: limits)
    let byteByByte = feedGrowing(input) { incremental.parse($0) }
    #expect(allAtOnce == byteByByte, "all at once vs byte by byte", sourceLocation: sourceLocation)
    return allAtOnce
}

/// Parses a request given as text (use `\r\n`).
func parseRequest(
    _ text: String, limits: HTTPParserLimits = .default, sourceLocation: SourceLocation = #_sourceLocation
) -> HeadParseResult<HTTPRequestHead> {
    parseRequest(bytes(text), limits: limits, sourceLocation: sourceLocation)
}

/// Parses a response all at once and byte by byte; both must agree.
func parseResponse(
    _ input: [UInt8], limits: HTTPParserLimits = .default, sourceLocation: SourceLocation = #_sourceLocation
) -> HeadParseResult<HTTPResponseHead> {
    var whole = HTTPResponseHeadParser(limits: limits)
    let allAtOnce = input.withUnsafeBytes { whole.parse($0) }
    var incremental = HTTPResponseHeadParser(limits: limits)
    let byteByByte = feedGrowing(input) { incremental.parse($0) }
    #expect(allAtOnce == byteByByte, "all at once vs byte by byte", sourceLocation: sourceLocation)
    return allAtOnce
}

/// Parses a response given as text (use `\r\n`).
func parseResponse(
    _ text: String, limits: HTTPParserLimits = .default, sourceLocation: SourceLocation = #_sourceLocation
) -> HeadParseResult<HTTPResponseHead> {
    parseResponse(bytes(text), limits: limits, sourceLocation: sourceLocation)
}

/// Calls `parse` with prefixes of `input` of length 0, 1, 2, … until it stops answering `.needMore`.
func feedGrowing<Head: Sendable>(
    _ input: [UInt8], _ parse: (UnsafeRawBufferPointer) -> HeadParseResult<Head>
) -> HeadParseResult<Head> {
    input.withUnsafeBytes { raw in
        var result = HeadParseResult<Head>.needMore
        for length in 0...raw.count {
            result = parse(UnsafeRawBufferPointer(rebasing: raw[0..<length]))
            if case .needMore = result { continue }
            break
        }
        return result
    }
}

/// What decoding a chunked body gave.
struct ChunkedOutcome: Equatable {
    var data: [UInt8]
    var result: ChunkedDecodeResult
    var bodyBytesDecoded: Int64
}

/// Decodes `input` with one decoder in a single call, and with another one byte per call; both must agree
/// (consumed counts are totals over the input). Returns the outcome.
func decodeChunked(
    _ input: [UInt8], limits: HTTPParserLimits = .default, maxBodyBytes: Int64 = .max,
    sourceLocation: SourceLocation = #_sourceLocation
) -> ChunkedOutcome {
    var whole = ChunkedDecoder(limits: limits, maxBodyBytes: maxBodyBytes)
    var wholeData: [UInt8] = []
    let wholeResult = input.withUnsafeBytes { raw in whole.decode(raw) { wholeData.append(contentsOf: $0) } }
    let allAtOnce = ChunkedOutcome(data: wholeData, result: wholeResult, bodyBytesDecoded: whole.bodyBytesDecoded)

    let byteByByte = decodeInPieces(input, sizes: [1], limits: limits, maxBodyBytes: maxBodyBytes)
    #expect(allAtOnce == byteByByte, "all at once vs byte by byte", sourceLocation: sourceLocation)
    return allAtOnce
}

/// Decodes `input` split into pieces whose sizes cycle through `sizes`, reporting totals like a single call.
func decodeInPieces(
    _ input: [UInt8], sizes: [Int], limits: HTTPParserLimits = .default, maxBodyBytes: Int64 = .max
) -> ChunkedOutcome {
    var decoder = ChunkedDecoder(limits: limits, maxBodyBytes: maxBodyBytes)
    var data: [UInt8] = []
    var offset = 0
    var piece = 0
    var result = ChunkedDecodeResult.consumed(0)
    input.withUnsafeBytes { raw in
        while offset < raw.count {
            let size = max(1, sizes[piece % sizes.count])
            piece += 1
            let end = min(raw.count, offset + size)
            let step = decoder.decode(UnsafeRawBufferPointer(rebasing: raw[offset..<end])) { data.append(contentsOf: $0) }
            switch step {
            case .consumed(let count):
                offset += count
                result = .consumed(offset)
            case .done(let consumed):
                result = .done(consumed: offset + consumed)
                return
            case .failure:
                result = step
                return
            }
        }
    }
    return ChunkedOutcome(data: data, result: result, bodyBytesDecoded: decoder.bodyBytesDecoded)
}

/// A small deterministic generator for the mutation tests.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
