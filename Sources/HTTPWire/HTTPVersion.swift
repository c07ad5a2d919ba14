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
}
