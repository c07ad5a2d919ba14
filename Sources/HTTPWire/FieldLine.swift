/// Validation of one field line, shared by heads and chunked trailers.
enum FieldLine {
    /// Checks `field-line = field-name ":" OWS field-value OWS` (RFC 9112 §5) over `buffer[start..<end]`
    /// (CRLF excluded) and returns the name range and the OWS-trimmed value range, as offsets into `buffer`.
    ///
    /// Refused (400): a line starting with SP/HTAB (obs-fold, RFC 9112 §5.2), an empty name, a name that is
    /// not a token (RFC 9110 §5.1), whitespace between name and colon (RFC 9112 §5.1), a missing colon,
    /// and any control byte other than HTAB in the value, including NUL and DEL (RFC 9110 §5.5).
    ///
    /// `valueBytesChecked`: the caller has already seen every byte of the line and found none below 0x20 and no
    /// DEL (the head scanner's word-at-a-time pass does), so the value's bytes need no second look.
    static func validate(
        _ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int, valueBytesChecked: Bool = false
    ) -> Result<HTTPHeaderField, HTTPParseError> {
        guard start >= 0, start < end, end <= buffer.count else {
            return .failure(.badRequest("empty_field_name"))
        }
        if HTTPSyntax.isWhitespace(buffer[start]) { return .failure(.badRequest("obs_fold")) }
        var index = start
        while index < end, HTTPSyntax.isTChar(buffer[index]) { index += 1 }
        guard index < end else { return .failure(.badRequest("missing_colon")) }
        let stop = buffer[index]
        if stop != HeadScanner.colon {
            return .failure(.badRequest(HTTPSyntax.isWhitespace(stop) ? "whitespace_before_colon" : "invalid_field_name"))
        }
        if index == start { return .failure(.badRequest("empty_field_name")) }
        let nameEnd = index
        index += 1
        let valueStart = index
        if valueBytesChecked { index = end }
        // Eight bytes at a time: a word with no byte below 0x20 and none equal to 0x7F is all valid (bytes
        // from 0x80 are obs-text and allowed). Only a word that fails goes through the byte check (HTAB).
        if let base = buffer.baseAddress {
            while index + 8 <= end {
                let word = UInt64(littleEndian: (base + index).loadUnaligned(as: UInt64.self))
                let low: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
                let below20 = (word &- 0x20 &* low) & ~word & high
                let del = word ^ (0x7F &* low)
                let isDel = (del &- low) & ~del & high
                if below20 | isDel != 0 { break }
                index += 8
            }
        }
        while index < end {
            guard HTTPSyntax.isFieldValueByte(buffer[index]) else {
                return .failure(.badRequest("invalid_field_value"))
            }
            index += 1
        }
        let (lower, upper) = HTTPSyntax.trimOWS(buffer, valueStart, end)
        return .success(HTTPHeaderField(
            nameStart: Int32(clamping: start), nameEnd: Int32(clamping: nameEnd),
            valueStart: Int32(clamping: lower), valueEnd: Int32(clamping: upper)))
    }
}
