/// Parsing of `HTTP-version = HTTP-name "/" DIGIT "." DIGIT` (RFC 9112 §2.3).
enum HTTPVersion {
    /// Returns the minor version (0 or 1) of `buffer[start..<end]`. Anything not matching the grammar
    /// exactly (case-sensitive `HTTP`, one digit each) is 400; a well-formed version other than 1.0/1.1
    /// is 505 (RFC 9110 §15.6.6) — including `HTTP/1.2`, which RFC 9110 §2.5 would let us read as 1.1:
    /// the gateway prefers refusing over guessing.
    static func parseMinor(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> Result<Int, HTTPParseError> {
        guard start >= 0, end <= buffer.count, end - start == 8 else {
            return .failure(.badRequest("invalid_http_version"))
        }
        // The two versions there are, as one 8-byte compare each (every message has one); anything else takes the
        // byte checks below, which say what is wrong with it.
        if let base = buffer.baseAddress {
            let word = UInt64(littleEndian: (base + start).loadUnaligned(as: UInt64.self))
            if word == http11 { return .success(1) }
            if word == http10 { return .success(0) }
        }
        guard buffer[start] == 0x48, buffer[start + 1] == 0x54, buffer[start + 2] == 0x54,
              buffer[start + 3] == 0x50, buffer[start + 4] == 0x2F else { // "HTTP/"
            return .failure(.badRequest("invalid_http_version"))
        }
        let major = buffer[start + 5]
        let dot = buffer[start + 6]
        let minor = buffer[start + 7]
        guard (0x30...0x39).contains(major), dot == UInt8(ascii: "."), (0x30...0x39).contains(minor) else {
            return .failure(.badRequest("invalid_http_version"))
        }
        guard major == UInt8(ascii: "1"), minor == UInt8(ascii: "0") || minor == UInt8(ascii: "1") else {
            return .failure(.versionNotSupported)
        }
        return .success(Int(minor - 0x30))
    }

    /// `HTTP/1.1` and `HTTP/1.0` as the little-endian words of their eight bytes.
    private static let http11: UInt64 = 0x312E_312F_5054_5448
    private static let http10: UInt64 = 0x302E_312F_5054_5448
}
