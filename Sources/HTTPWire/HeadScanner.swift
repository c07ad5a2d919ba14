/// The incremental line scanner shared by the request and response head parsers.
///
/// It walks the buffer once (O(n) over all calls, remembering `position`), checks line endings
/// (strict CRLF, RFC 9112 §2.2), enforces the start-line and head limits byte by byte, and validates each
/// field line once when its CRLF arrives (RFC 9112 §5). It reports the start line to its owner, which
/// parses it, then continues to the empty line that ends the head.
struct HeadScanner: Sendable {
    /// What one `scan` call found.
    enum Step {
        case needMore
        /// The start line is complete: bytes `start..<end` of the buffer (no CRLF).
        case startLine(start: Int, end: Int)
        /// The head is complete; `consumed` counts bytes from the buffer start.
        case complete(HTTPHeaders, consumed: Int)
        case failure(HTTPParseError)
    }

    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let colon: UInt8 = 0x3A

    let limits: HTTPParserLimits
    /// Requests may be preceded by empty lines (RFC 9112 §2.2); responses may not.
    let skipsLeadingEmptyLines: Bool
    /// The error for a start line longer than `limits.effectiveRequestLineBytes`.
    let startLineTooLong: HTTPParseError

    private(set) var position = 0
    private var lineStart = 0
    private var headStart = -1
    private var leadingEmptyLines = 0
    private var sawStartLine = false
    /// No byte of the current line so far is below 0x20 or DEL (found by the word-at-a-time pass, which checks for
    /// them anyway): its field value then needs no second byte check.
    private var lineClean = true
    /// The field ranges of the head being scanned. Emptied when the next head's start line is complete, not at
    /// `reset()`: the head just returned shares this storage until it is dropped (the exchange or the response writer
    /// is done with it), so emptying it then reuses the storage in place instead of copying it (an allocation and a
    /// free per head).
    private var fields: [HTTPHeaderField] = []
    /// The head bytes of the last head (up to `reusedHeadBytes`), shared with it in the same way: a head whose
    /// predecessor is gone is copied into storage already allocated.
    private var headBytes: [UInt8] = []
    private var failed: HTTPParseError?

    init(limits: HTTPParserLimits, skipsLeadingEmptyLines: Bool, startLineTooLong: HTTPParseError) {
        self.limits = limits
        self.skipsLeadingEmptyLines = skipsLeadingEmptyLines
        self.startLineTooLong = startLineTooLong
    }

    mutating func reset() {
        position = 0
        lineStart = 0
        headStart = -1
        leadingEmptyLines = 0
        sawStartLine = false
        lineClean = true
        // `fields` is emptied at the next start line (see its comment).
        // Only when set: assigning nil over nil still destroyed the old optional through value witnesses.
        if failed != nil { failed = nil }
    }

    private mutating func fail(_ error: HTTPParseError) -> Step {
        failed = error
        return .failure(error)
    }

    mutating func scan(_ buffer: UnsafeRawBufferPointer) -> Step {
        if failed != nil { return .failure(failed!) }
        // Contract: the caller passes the same bytes again, possibly grown. A shorter buffer means it did
        // not; start over rather than read out of range.
        if buffer.count < position { reset() }
        let count = buffer.count

        while headStart < 0 {
            guard position < count else { return .needMore }
            let byte = buffer[position]
            if byte == Self.cr && skipsLeadingEmptyLines {
                guard position + 1 < count else { return .needMore }
                guard buffer[position + 1] == Self.lf else { return fail(.badRequest("bare_cr")) }
                leadingEmptyLines += 1
                if leadingEmptyLines > limits.maxLeadingEmptyLines {
                    return fail(.badRequest("too_many_leading_empty_lines"))
                }
                position += 2
            } else if byte == Self.lf {
                return fail(.badRequest("bare_lf"))
            } else {
                headStart = position
                lineStart = position
            }
        }

        let maxStartLine = limits.effectiveRequestLineBytes
        let maxHead = limits.maxHeadBytes
        while position < count {
            // Fast path over ordinary bytes within both limits. The per-byte logic below then sees only CR, LF,
            // other control bytes or DEL, or the byte at a limit.
            var stop = min(count, headStart + maxHead)
            if !sawStartLine { stop = min(stop, lineStart + maxStartLine) }
            var p = position
            // Eight bytes at a time while no byte is below 0x20 or DEL (so none is CR, LF or another control byte):
            // the classic "has a byte less than n" and "has a byte equal to n" word tests. The lowest bit set in a
            // failing word's mask marks exactly the first such byte (no borrow reaches a lower byte), so the scan
            // lands on it; the per-byte logic below handles it (CR ends the line; any other marks the line for the
            // field-value check).
            var found = false
            if let base = buffer.baseAddress {
                let low: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
                @inline(__always) func special(_ word: UInt64) -> UInt64 {
                    let del = word ^ (0x7F &* low)
                    return ((word &- 0x20 &* low) & ~word | (del &- low) & ~del) & high
                }
                // Two words per turn while both fit (long values such as an App Check token), then one.
                while p + 16 <= stop {
                    let first = special(UInt64(littleEndian: (base + p).loadUnaligned(as: UInt64.self)))
                    let second = special(UInt64(littleEndian: (base + p + 8).loadUnaligned(as: UInt64.self)))
                    if first | second != 0 {
                        p += first != 0 ? first.trailingZeroBitCount >> 3 : 8 + second.trailingZeroBitCount >> 3
                        found = true
                        break
                    }
                    p += 16
                }
                while !found && p + 8 <= stop {
                    let mask = special(UInt64(littleEndian: (base + p).loadUnaligned(as: UInt64.self)))
                    if mask != 0 {
                        p += mask.trailingZeroBitCount >> 3
                        found = true
                        break
                    }
                    p += 8
                }
            }
            if !found {
                while p < stop {
                    let byte = buffer[p]
                    if byte < 0x20 || byte == 0x7F { break }
                    p += 1
                }
            }
            position = p
            if position >= count { break }
            let byte = buffer[position]
            if byte == Self.cr {
                // The LF that must follow would be the byte at position + 1.
                if position + 1 - headStart >= maxHead { return fail(.headersTooLarge("head_too_large")) }
                guard position + 1 < count else { return .needMore }
                guard buffer[position + 1] == Self.lf else { return fail(.badRequest("bare_cr")) }
                let start = lineStart
                let end = position
                let clean = lineClean
                position += 2
                lineStart = position
                lineClean = true
                if !sawStartLine {
                    sawStartLine = true
                    if !fields.isEmpty { fields.removeAll(keepingCapacity: true) }
                    return .startLine(start: start, end: end)
                }
                if start == end { return .complete(completeHeaders(buffer), consumed: position) }
                if let error = addField(buffer, start, end, clean: clean) { return fail(error) }
                continue
            }
            if byte == Self.lf { return fail(.badRequest("bare_lf")) }
            lineClean = false
            if !sawStartLine && position - lineStart >= maxStartLine { return fail(startLineTooLong) }
            if position - headStart >= maxHead { return fail(.headersTooLarge("head_too_large")) }
            position += 1
        }
        return .needMore
    }

    /// A head up to this size keeps its bytes in `headBytes` (reused from head to head); a larger one gets an array of
    /// its own, so an idle connection holds at most this much after a large head.
    static let reusedHeadBytes = 2048

    /// The headers of the head that ends at `position`: its bytes copied out of `buffer` with the field ranges.
    private mutating func completeHeaders(_ buffer: UnsafeRawBufferPointer) -> HTTPHeaders {
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[headStart..<position])
        guard bytes.count <= Self.reusedHeadBytes else {
            return HTTPHeaders(validatedBytes: [UInt8](bytes), fields: fields)
        }
        // In place when the previous head is gone (the usual case); a copy of the storage otherwise, as before. One
        // replacement of the whole contents: emptying and appending were two generic calls (~190 per head).
        headBytes.replaceSubrange(headBytes.indices, with: bytes)
        return HTTPHeaders(validatedBytes: headBytes, fields: fields)
    }

    /// Validates field line `start..<end` (RFC 9112 §5, RFC 9110 §5.1 and §5.5) and records its ranges.
    private mutating func addField(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int,
                                   clean: Bool) -> HTTPParseError? {
        let range = FieldLine.validate(buffer, start, end, valueBytesChecked: clean)
        switch range {
        case .failure(let error):
            return error
        case .success(let field):
            guard fields.count < limits.maxHeaders else { return .headersTooLarge("too_many_headers") }
            fields.append(field.shifted(by: Int32(clamping: headStart)))
            return nil
        }
    }
}
