/// Incremental, strict parser of HTTP/1.x request heads (RFC 9112 §2–§6).
///
/// Usage: call `parse(_:)` with all unconsumed bytes of the connection, starting at the same first byte on
/// every call and growing as data arrives. The parser remembers how far it has scanned, so the total work
/// is O(head size) however the bytes are split. On `.complete(head, consumed:)` the body (or the next
/// pipelined request) starts at `consumed`; the parser has reset itself and is ready for the next request
/// (`reset()` does the same explicitly). After `.failure` it keeps returning that failure until `reset()`;
/// the caller answers `error.status` and closes the connection.
///
/// Limits (`HTTPParserLimits`), enforced as bytes arrive:
/// - request line without CRLF within `effectiveRequestLineBytes` → `414` (before the rest arrives);
/// - head without its terminating empty line within `maxHeadBytes` → `431`;
/// - more than `maxHeaders` field lines → `431`;
/// - more than `maxLeadingEmptyLines` empty lines before the request line (RFC 9112 §2.2) → `400`.
///
/// Strictness (all `400` unless noted):
/// - line endings must be CRLF; a bare CR anywhere or a bare LF is refused (RFC 9112 §2.2);
/// - `request-line = method SP request-target SP HTTP-version` with single spaces (RFC 9112 §3);
///   method a token (RFC 9110 §5.6.2 / §9.1); target non-empty, bytes 0x21–0x7E only (RFC 9112 §3.2);
/// - version exactly `HTTP/1.0` or `HTTP/1.1`; another well-formed `HTTP/x.y` → `505`;
/// - field lines per `FieldLine` rules: no obs-fold (RFC 9112 §5.2), no whitespace before the colon
///   (RFC 9112 §5.1), name a non-empty token, no control bytes but HTAB in values (RFC 9110 §5.5);
/// - `Content-Length` `1*DIGIT` fitting `Int64`; repeats only with identical values (RFC 9110 §8.6);
/// - `Content-Length` together with `Transfer-Encoding` is refused rather than resolved (RFC 9112 §6.1,
///   §6.3 item 3 allows either; refusing closes request-smuggling ambiguity);
/// - `Transfer-Encoding` on HTTP/1.0 (RFC 9112 §6.1); `chunked` repeated or not last (RFC 9112 §6.3
///   item 4); any other transfer coding → `501` (RFC 9112 §6.1);
/// - HTTP/1.1 without a `Host`, or any request with more than one `Host` (RFC 9112 §3.2);
///   a `Host` value outside RFC 3986 §3.2.2 characters;
/// - a `Connection` element that is not a token.
public struct HTTPRequestHeadParser: Sendable {
    /// The limits this parser enforces.
    public let limits: HTTPParserLimits
    private var core: HeadParserCore<RequestLine>

    /// Creates a parser with the given limits (docs/configuration.md defaults when omitted).
    public init(limits: HTTPParserLimits = .default) {
        self.limits = limits
        self.core = HeadParserCore(limits: limits, skipsLeadingEmptyLines: true, startLineTooLong: .uriTooLong)
    }

    /// Forgets all progress: the next `parse` starts a new request at the buffer's first byte.
    public mutating func reset() {
        core.reset()
    }

    /// Continues parsing the head at the start of `buffer` (see the type's documentation for the contract).
    public mutating func parse(_ buffer: UnsafeRawBufferPointer) -> HeadParseResult<HTTPRequestHead> {
        core.parse(buffer)
    }

    /// The method as a `String`: the methods of RFC 9110 §9.3 other than CONNECT and TRACE are literals (no decoding,
    /// no storage), compared byte for byte (methods are case-sensitive); any other token is decoded.
    static func methodString(_ bytes: UnsafeRawBufferPointer) -> String {
        @inline(__always) func matches(_ literal: StaticString) -> Bool {
            let expected = literal.utf8Start
            for i in 0..<bytes.count where bytes[i] != expected[i] { return false }
            return true
        }
        switch bytes.count {
        case 3:
            if matches("GET") { return "GET" }
            if matches("PUT") { return "PUT" }
        case 4:
            if matches("POST") { return "POST" }
            if matches("HEAD") { return "HEAD" }
        case 5: if matches("PATCH") { return "PATCH" }
        case 6: if matches("DELETE") { return "DELETE" }
        case 7: if matches("OPTIONS") { return "OPTIONS" }
        default: break
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A request line and the request head made from it (RFC 9112 §3).
struct RequestLine: HeadStartLine {
    private var method = ""
    private var target = ""
    private var versionMinor = 1

    /// `request-line = method SP request-target SP HTTP-version` (RFC 9112 §3).
    mutating func parse(_ buffer: UnsafeRawBufferPointer, _ start: Int, _ end: Int) -> HTTPParseError? {
        let space: UInt8 = 0x20
        var index = start
        while index < end, HTTPSyntax.isTChar(buffer[index]) { index += 1 }
        guard index > start, index < end, buffer[index] == space else { return .badRequest("invalid_method") }
        let methodEnd = index
        index += 1
        let targetStart = index
        while index < end, buffer[index] >= 0x21 && buffer[index] <= 0x7E { index += 1 }
        guard index > targetStart else { return .badRequest("invalid_target") }
        guard index < end, buffer[index] == space else { return .badRequest("invalid_target") }
        let targetEnd = index
        index += 1
        switch HTTPVersion.parseMinor(buffer, index, end) {
        case .failure(let error): return error
        case .success(let minor): versionMinor = minor
        }
        method = HTTPRequestHeadParser.methodString(UnsafeRawBufferPointer(rebasing: buffer[start..<methodEnd]))
        target = String(decoding: UnsafeRawBufferPointer(rebasing: buffer[targetStart..<targetEnd]), as: UTF8.self)
        return nil
    }

    /// Applies the request's own rules to the complete field section: `Host` (RFC 9112 §3.2) and the body's framing
    /// (RFC 9112 §6.3).
    func head(headers: HTTPHeaders, fields: consuming HeadFields) -> Result<HTTPRequestHead, HTTPParseError> {
        if fields.hostCount > 1 { return .failure(.badRequest("multiple_host")) }
        if versionMinor == 1 && fields.hostCount == 0 { return .failure(.badRequest("missing_host")) }
        let framing: RequestBodyFraming
        switch fields.isChunked(versionMinor: versionMinor) {
        case .failure(let error): return .failure(error)
        case .success(true): framing = .chunked
        case .success(false): framing = fields.contentLength.map { .contentLength($0) } ?? .none
        }
        return .success(HTTPRequestHead(
            method: method, target: target, versionMinor: versionMinor, headers: headers, framing: framing,
            keepAlive: fields.keepAlive(versionMinor: versionMinor),
            expectContinue: versionMinor == 1 && fields.expectContinue,
            connectionTokens: fields.connectionTokens, hostText: nil, hostValue: fields.hostValue))
    }
}
