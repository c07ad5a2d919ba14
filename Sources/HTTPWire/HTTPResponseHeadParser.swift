/// Incremental, strict parser of HTTP/1.x response heads from an upstream (RFC 9112 §4–§6).
///
/// Same calling contract, limits and field rules as `HTTPRequestHeadParser`, except:
/// - `status-line = HTTP-version SP status-code SP [ reason-phrase ]` (RFC 9112 §4); the status code is
///   three digits in 100–599; the reason phrase may be empty, and for robustness the SP before an empty
///   reason may be missing; it may hold HTAB, SP, VCHAR and obs-text only;
/// - a status line longer than `effectiveRequestLineBytes` fails with `431 status_line_too_long`;
/// - no leading empty lines are skipped (RFC 9112 §2.2 allows that only to servers);
/// - no `Host` rules;
/// - `Transfer-Encoding` with `Content-Length` is refused (400) instead of letting `Transfer-Encoding`
///   win as RFC 9112 §6.3 item 3 permits: such a response may be a smuggling attempt and is not forwarded;
/// - a transfer coding other than `chunked` is refused (501): the gateway would have to forward a
///   coding it cannot frame; `Transfer-Encoding` on an HTTP/1.0 response is refused (RFC 9112 §6.1).
///
/// The caller answers its client `502` for any failure. 1xx heads are returned like any other; the caller
/// skips them and parses again (after `.complete` the parser is already reset).
public struct HTTPResponseHeadParser: Sendable {
    /// The limits this parser enforces.
    public let limits: HTTPParserLimits
    private var core: HeadParserCore<StatusLine>

    /// Creates a parser with the given limits (docs/configuration.md defaults when omitted).
    public init(limits: HTTPParserLimits = .default) {
        self.limits = limits
        self.core = HeadParserCore(limits: limits, skipsLeadingEmptyLines: false,
                                   startLineTooLong: .headersTooLarge("status_line_too_long"))
    }

    /// Forgets all progress: the next `parse` starts a new response at the buffer's first byte.
    public mutating func reset() {
        core.reset()
    }

    /// Continues parsing the head at the start of `buffer` (see `HTTPRequestHeadParser` for the contract).
    public mutating func parse(_ buffer: UnsafeRawBufferPointer) -> HeadParseResult<HTTPResponseHead> {
        core.parse(buffer)
    }
}

/// A status line and the response head made from it (RFC 9112 §4).
struct StatusLine: HeadStartLine {
    private var status = 0
    private var reasonRange = 0..<0
    private var versionMinor = 1

    /// `status-line = HTTP-version SP status-code SP [ reason-phrase ]` (RFC 9112 §4).
    mutating func parse(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> HTTPParseError? {
        guard end - start >= 12 else { return .badRequest("invalid_status_line") }
        switch HTTPVersion.parseMinor(buffer, start, start + 8) {
        case .failure(let error): return error
        case .success(let minor): versionMinor = minor
        }
        guard buffer[start + 8] == 0x20 else { return .badRequest("invalid_status_line") }
        var code = 0
        for offset in 9..<12 {
            let digit = buffer[start + offset]
            guard digit >= 0x30 && digit <= 0x39 else { return .badRequest("invalid_status_code") }
            code = code * 10 + Int(digit - 0x30)
        }
        guard (100...599).contains(code) else { return .badRequest("invalid_status_code") }
        status = code
        var reasonStart = start + 12
        if reasonStart < end {
            guard buffer[reasonStart] == 0x20 else { return .badRequest("invalid_status_line") }
            reasonStart += 1
        }
        for index in reasonStart..<max(reasonStart, end) where !HTTPSyntax.isFieldValueByte(buffer[index]) {
            return .badRequest("invalid_reason_phrase")
        }
        // The head's own copy of its bytes starts with this line: offsets from `start`.
        reasonRange = (reasonStart - start)..<(max(reasonStart, end) - start)
        return nil
    }

    /// Applies the response's framing rules to the complete field section (RFC 9112 §6.3).
    func head(headers: HTTPHeaders, fields: consuming HeadFields) -> Result<HTTPResponseHead, HTTPParseError> {
        let chunked: Bool
        switch fields.isChunked(versionMinor: versionMinor) {
        case .failure(let error): return .failure(error)
        case .success(let isChunked): chunked = isChunked
        }
        return .success(HTTPResponseHead(
            status: status, reasonRange: reasonRange, versionMinor: versionMinor, headers: headers,
            contentLength: fields.contentLength, isChunked: chunked, connectionTokens: fields.connectionTokens,
            keepAlive: fields.keepAlive(versionMinor: versionMinor)))
    }
}
