/// The start line of a head, the part in which a request head and a response head differ (RFC 9112 §3, §4): it is
/// parsed and kept by a value of this type, which then makes the head from the complete field section.
/// `HeadParserCore` does the rest, the same for both.
protocol HeadStartLine: Sendable {
    associatedtype Head: Sendable
    /// Nothing parsed yet.
    init()
    /// Parses the start line `buffer[start..<end]` (without its CRLF) and keeps what the head needs.
    mutating func parse(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> HTTPParseError?
    /// The head, from the kept start line and the field section with its framing fields (already checked by
    /// `HeadFields.extract`). `fields` is handed over (`consuming`): it is not used after, and a copy of it cost a copy
    /// and a destroy of the whole value per head.
    func head(headers: HTTPHeaders, fields: consuming HeadFields) -> Result<Head, HTTPParseError>
}

/// The incremental parse loop both head parsers share: `HeadScanner` finds the start line and the field lines,
/// `Line` parses the start line, `HeadFields` extracts and checks the framing fields, and the first failure sticks
/// until `reset()` (see `HTTPRequestHeadParser` for the calling contract).
struct HeadParserCore<Line: HeadStartLine>: Sendable {
    private var scanner: HeadScanner
    private var line = Line()
    private var failed: HTTPParseError?

    init(limits: HTTPParserLimits, skipsLeadingEmptyLines: Bool, startLineTooLong: HTTPParseError) {
        scanner = HeadScanner(limits: limits, skipsLeadingEmptyLines: skipsLeadingEmptyLines,
                              startLineTooLong: startLineTooLong)
    }

    mutating func reset() {
        scanner.reset()
        line = Line()
        // Only when set: assigning nil over nil still destroyed the old optional through value witnesses.
        if failed != nil { failed = nil }
    }

    mutating func parse(_ buffer: UnsafeRawBufferPointer) -> HeadParseResult<Line.Head> {
        if failed != nil { return .failure(failed!) }
        while true {
            switch scanner.scan(buffer) {
            case .needMore:
                return .needMore
            case .failure(let error):
                return fail(error)
            case .startLine(let start, let end):
                if let error = line.parse(buffer, start, end) { return fail(error) }
            case .complete(let headers, let consumed):
                var fields = HeadFields()
                if let error = HeadFields.extract(from: headers, into: &fields) { return fail(error) }
                // Moved, not copied (the copy and its destroy cost about 110 per head).
                switch line.head(headers: headers, fields: consume fields) {
                case .success(let head):
                    reset()
                    return .complete(head, consumed: consumed)
                case .failure(let error):
                    return fail(error)
                }
            }
        }
    }

    private mutating func fail(_ error: HTTPParseError) -> HeadParseResult<Line.Head> {
        failed = error
        return .failure(error)
    }
}
