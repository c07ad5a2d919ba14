/// Incremental, strict decoder of the chunked transfer coding (RFC 9112 §7.1).
///
/// Feed it the body bytes as they arrive; each call consumes its whole input (or stops at the end of the
/// body) and hands the chunk data to `onData` as slices of the input, without copying. The state is kept
/// byte by byte, so any split of the input gives the same data and the same result.
///
/// Rules (all failures `400` unless noted):
/// - `chunk-size = 1*HEXDIG`, at most 16 digits (leading zeros included) and at most `Int64.max`;
/// - `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )` with token names and
///   token or quoted-string values (RFC 9112 §7.1.1); their total per chunk line is bounded by
///   `limits.maxChunkExtensionBytes`; extensions are validated and ignored;
/// - every line ends with CRLF exactly (no bare CR or LF), and chunk data is followed by CRLF exactly;
/// - the trailer section (RFC 9112 §7.1.2) follows the field-line rules of heads (no obs-fold, no
///   whitespace before the colon, token names, no control bytes in values); it is bounded by
///   `limits.maxHeadBytes` bytes (`431 trailers_too_large`) and `limits.maxHeaders` fields
///   (`431 too_many_trailers`), and kept for `takeTrailers()`;
/// - the decoded data may not exceed `maxBodyBytes` (`413`): checked when a chunk size is read, before any
///   of its data is passed on.
public struct ChunkedDecoder: Sendable {
    private enum State: Sendable {
        case size, sizeWhitespace, extensionNameStart, extensionName, extensionAfterName
        case extensionValueStart, extensionValueToken, extensionQuoted, extensionQuotedEscape, extensionAfterQuoted
        case sizeLineLF, data, dataCR, dataLF
        case trailerLineStart, trailerName, trailerValue, trailerLineLF, trailerEndLF
        case done
    }

    /// The limits on extensions and trailers.
    public let limits: HTTPParserLimits
    /// The most data bytes the body may decode to.
    public let maxBodyBytes: Int64
    /// Data bytes decoded so far (sum of the chunk data passed to `onData`).
    public private(set) var bodyBytesDecoded: Int64 = 0
    private var state = State.size
    private var chunkSize: Int64 = 0
    private var sizeDigits = 0
    private var extensionBytes = 0
    private var trailerBytes = 0
    private var trailerFields = 0
    /// The trailer section's bytes as received (bounded by `limits.maxHeadBytes`, the check above).
    private var trailerSection: [UInt8] = []
    private var failed: HTTPParseError?

    /// Creates a decoder for one chunked body.
    /// - Parameters:
    ///   - limits: extension and trailer bounds (`maxChunkExtensionBytes`, `maxHeadBytes`, `maxHeaders`).
    ///   - maxBodyBytes: the most data the body may carry; more fails with `413`. Default: unlimited.
    public init(limits: HTTPParserLimits = .default, maxBodyBytes: Int64 = .max) {
        self.limits = limits
        self.maxBodyBytes = max(0, maxBodyBytes)
    }

    /// Whether the whole body, trailers included, has been read.
    public var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// The trailer fields of a body that is done (RFC 9112 §7.1.2), names and OWS-trimmed values as received; nil when
    /// there were none. Already checked by the decoder (token names, field values, the head's limits).
    public func takeTrailers() -> HTTPHeaders? {
        guard isDone, trailerFields > 0 else { return nil }
        var fields: [HTTPHeaderField] = []
        var lineStart = 0
        let bytes = trailerSection
        var i = 0
        while i + 1 < bytes.count {
            guard bytes[i] == 13, bytes[i + 1] == 10 else { i += 1; continue }
            if i > lineStart, let colon = bytes[lineStart..<i].firstIndex(of: UInt8(ascii: ":")) {
                var lo = colon + 1, hi = i
                while lo < hi && (bytes[lo] == 0x20 || bytes[lo] == 0x09) { lo += 1 }
                while hi > lo && (bytes[hi - 1] == 0x20 || bytes[hi - 1] == 0x09) { hi -= 1 }
                fields.append(HTTPHeaderField(nameStart: Int32(lineStart), nameEnd: Int32(colon),
                                              valueStart: Int32(lo), valueEnd: Int32(hi)))
            }
            i += 2
            lineStart = i
        }
        return fields.isEmpty ? nil : HTTPHeaders(bytes: bytes, fields: fields)
    }

    /// Starts over for a new body.
    public mutating func reset() {
        self = ChunkedDecoder(limits: limits, maxBodyBytes: maxBodyBytes)
    }

    private mutating func fail(_ error: HTTPParseError) -> ChunkedDecodeResult {
        failed = error
        return .failure(error)
    }

    private static func hexValue(_ byte: UInt8) -> Int64? {
        switch byte {
        case 0x30...0x39: Int64(byte - 0x30)
        case 0x41...0x46: Int64(byte - 0x41 + 10)
        case 0x61...0x66: Int64(byte - 0x61 + 10)
        default: nil
        }
    }

    /// `qdtext` of RFC 9110 §5.6.4: HTAB, SP, `!`, `#`–`[`, `]`–`~`, obs-text.
    private static func isQDText(_ byte: UInt8) -> Bool {
        byte == 0x09 || byte == 0x20 || byte == 0x21 || (byte >= 0x23 && byte <= 0x5B)
            || (byte >= 0x5D && byte <= 0x7E) || byte >= 0x80
    }

    /// Decodes as much of `input` as possible, passing chunk data to `onData` as slices of `input`.
    /// After `.done` or `.failure`, further calls return the same outcome (`.done(consumed: 0)`).
    public mutating func decode(
        _ input: UnsafeRawBufferPointer, onData: (UnsafeRawBufferPointer) -> Void
    ) -> ChunkedDecodeResult {
        if let failed { return .failure(failed) }
        let cr: UInt8 = 0x0D, lf: UInt8 = 0x0A, semicolon: UInt8 = 0x3B, equals: UInt8 = 0x3D
        let quote: UInt8 = 0x22, backslash: UInt8 = 0x5C, colon: UInt8 = 0x3A
        let count = input.count
        var index = 0
        while index < count {
            let byte = input[index]
            switch state {
            case .done:
                return .done(consumed: index)

            case .data:
                let available = Int64(count - index)
                let take = Int(min(chunkSize, available))
                onData(UnsafeRawBufferPointer(rebasing: input[index..<(index + take)]))
                chunkSize -= Int64(take)
                bodyBytesDecoded += Int64(take)
                index += take
                if chunkSize == 0 { state = .dataCR }
                continue

            case .dataCR:
                guard byte == cr else { return fail(.badRequest("missing_chunk_crlf")) }
                state = .dataLF
            case .dataLF:
                guard byte == lf else { return fail(.badRequest("missing_chunk_crlf")) }
                state = .size
                chunkSize = 0
                sizeDigits = 0
                extensionBytes = 0

            case .size:
                if let digit = Self.hexValue(byte) {
                    sizeDigits += 1
                    guard sizeDigits <= 16 else { return fail(.badRequest("chunk_size_too_long")) }
                    guard chunkSize <= (Int64.max - digit) >> 4 else {
                        return fail(.badRequest("chunk_size_overflow"))
                    }
                    chunkSize = chunkSize << 4 | digit
                    index += 1
                    continue
                }
                guard sizeDigits > 0 else { return fail(.badRequest("invalid_chunk_size")) }
                switch byte {
                case cr: state = .sizeLineLF
                case semicolon:
                    extensionBytes = 1
                    state = .extensionNameStart
                case 0x20, 0x09:
                    extensionBytes = 1
                    state = .sizeWhitespace
                case lf: return fail(.badRequest("bare_lf"))
                default: return fail(.badRequest("invalid_chunk_size"))
                }

            case .sizeLineLF:
                guard byte == lf else { return fail(.badRequest("bare_cr")) }
                if chunkSize == 0 {
                    state = .trailerLineStart
                } else {
                    guard chunkSize <= maxBodyBytes - bodyBytesDecoded else { return fail(.bodyTooLarge) }
                    state = .data
                }

            case .sizeWhitespace, .extensionNameStart, .extensionName, .extensionAfterName,
                 .extensionValueStart, .extensionValueToken, .extensionQuoted, .extensionQuotedEscape,
                 .extensionAfterQuoted:
                if byte == cr, canEndExtension {
                    state = .sizeLineLF
                    break
                }
                extensionBytes += 1
                guard extensionBytes <= limits.maxChunkExtensionBytes else {
                    return fail(.badRequest("chunk_extension_too_long"))
                }
                guard let next = nextExtensionState(byte, semicolon: semicolon, equals: equals,
                                                    quote: quote, backslash: backslash) else {
                    return fail(.badRequest(byte == lf ? "bare_lf" : "invalid_chunk_extension"))
                }
                state = next

            case .trailerLineStart, .trailerName, .trailerValue, .trailerLineLF, .trailerEndLF:
                trailerBytes += 1
                guard trailerBytes <= limits.maxHeadBytes else {
                    return fail(.headersTooLarge("trailers_too_large"))
                }
                trailerSection.append(byte)
                switch state {
                case .trailerLineStart:
                    if byte == cr {
                        state = .trailerEndLF
                    } else if HTTPSyntax.isTChar(byte) {
                        state = .trailerName
                    } else {
                        return fail(.badRequest(
                            HTTPSyntax.isWhitespace(byte) ? "obs_fold"
                                : byte == colon ? "empty_field_name"
                                : byte == lf ? "bare_lf" : "invalid_field_name"))
                    }
                case .trailerName:
                    if byte == colon {
                        trailerFields += 1
                        guard trailerFields <= limits.maxHeaders else {
                            return fail(.headersTooLarge("too_many_trailers"))
                        }
                        state = .trailerValue
                    } else if !HTTPSyntax.isTChar(byte) {
                        return fail(.badRequest(
                            HTTPSyntax.isWhitespace(byte) ? "whitespace_before_colon"
                                : byte == cr || byte == lf ? "missing_colon" : "invalid_field_name"))
                    }
                case .trailerValue:
                    if byte == cr {
                        state = .trailerLineLF
                    } else if !HTTPSyntax.isFieldValueByte(byte) {
                        return fail(.badRequest(byte == lf ? "bare_lf" : "invalid_field_value"))
                    }
                case .trailerLineLF:
                    guard byte == lf else { return fail(.badRequest("bare_cr")) }
                    state = .trailerLineStart
                case .trailerEndLF:
                    guard byte == lf else { return fail(.badRequest("bare_cr")) }
                    state = .done
                    return .done(consumed: index + 1)
                default:
                    break
                }
            }
            index += 1
        }
        if case .done = state { return .done(consumed: 0) }
        return .consumed(count)
    }

    /// Whether a CR may end the chunk-size line in the current extension state.
    private var canEndExtension: Bool {
        switch state {
        case .extensionName, .extensionValueToken, .extensionAfterQuoted: true
        default: false
        }
    }

    /// The extension state after `byte` (RFC 9112 §7.1.1), or `nil` when `byte` is not allowed there.
    private func nextExtensionState(
        _ byte: UInt8, semicolon: UInt8, equals: UInt8, quote: UInt8, backslash: UInt8
    ) -> State? {
        let whitespace = HTTPSyntax.isWhitespace(byte)
        let tchar = HTTPSyntax.isTChar(byte)
        switch state {
        case .sizeWhitespace:
            if whitespace { return .sizeWhitespace }
            return byte == semicolon ? .extensionNameStart : nil
        case .extensionNameStart:
            if whitespace { return .extensionNameStart }
            return tchar ? .extensionName : nil
        case .extensionName:
            if tchar { return .extensionName }
            if whitespace { return .extensionAfterName }
            if byte == equals { return .extensionValueStart }
            return byte == semicolon ? .extensionNameStart : nil
        case .extensionAfterName:
            if whitespace { return .extensionAfterName }
            if byte == equals { return .extensionValueStart }
            return byte == semicolon ? .extensionNameStart : nil
        case .extensionValueStart:
            if whitespace { return .extensionValueStart }
            if tchar { return .extensionValueToken }
            return byte == quote ? .extensionQuoted : nil
        case .extensionValueToken:
            if tchar { return .extensionValueToken }
            if whitespace { return .sizeWhitespace }
            return byte == semicolon ? .extensionNameStart : nil
        case .extensionQuoted:
            if byte == quote { return .extensionAfterQuoted }
            if byte == backslash { return .extensionQuotedEscape }
            return Self.isQDText(byte) ? .extensionQuoted : nil
        case .extensionQuotedEscape:
            // quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ) (RFC 9110 §5.6.4)
            return byte == 0x09 || (byte >= 0x20 && byte != 0x7F) ? .extensionQuoted : nil
        case .extensionAfterQuoted:
            if whitespace { return .sizeWhitespace }
            return byte == semicolon ? .extensionNameStart : nil
        default:
            return nil
        }
    }
}
