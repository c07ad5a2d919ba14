/// The framing- and connection-related fields of a head, extracted in one pass over `HTTPHeaders`
/// and checked for the rules both requests and responses share.
struct HeadFields: Sendable {
    /// The single agreed `Content-Length`, if any field was present.
    var contentLength: Int64?
    /// Whether any `Transfer-Encoding` field was present.
    var hasTransferEncoding = false
    /// Lower-cased tokens of every `Connection` field (RFC 9110 §7.6.1).
    var connectionTokens: [String] = []
    /// Number of `Host` fields and where the value of the first lies in the head's bytes (a string only when asked for:
    /// `HTTPRequestHead.host`).
    var hostCount = 0
    var hostValue: Range<Int32>?
    /// `Expect: 100-continue` present (RFC 9110 §10.1.1).
    var expectContinue = false
    /// `close` / `keep-alive` among `connectionTokens` (any case: the tokens are lower-cased).
    private var hasClose = false
    private var hasKeepAlive = false

    private var chunkedCount = 0
    private var lastCodingIsChunked = false
    private var unknownCodings = 0
    private var transferCodingElements = 0

    /// Extracts and checks the fields. Failures (400): `Content-Length` not `1*DIGIT` (lists of identical
    /// values allowed, RFC 9110 §8.6), overflowing `Int64`, or differing values; a `Connection` element that
    /// is not a token (RFC 9110 §7.6.1); a `Host` value with characters outside RFC 3986 §3.2.2 host/port;
    /// a `Transfer-Encoding` element that is not a transfer-coding (RFC 9112 §7).
    /// Fills `result` (a fresh `HeadFields()`) in place and returns the failure, if any: no `Result` and no copy of the
    /// struct per head (it holds a string and an array, so each copy and destroy went through value witnesses).
    static func extract(from headers: HTTPHeaders, into result: inout HeadFields) -> HTTPParseError? {
        var failure: HTTPParseError?
        // A plain loop over the ranges (no closure per field): this runs for every request and response head.
        headers.bytes.withUnsafeBytes { raw in
            for f in headers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                guard let first = name.first else { continue }
                // Most fields are none of these: one look at the first letter sends them on.
                let lower = HTTPSyntax.lowercased(first)
                guard lower == UInt8(ascii: "c") || lower == UInt8(ascii: "t") || lower == UInt8(ascii: "h")
                        || lower == UInt8(ascii: "e") else { continue }
                let value = UnsafeRawBufferPointer(rebasing: raw[Int(f.valueStart)..<Int(f.valueEnd)])
                switch lower {
                case UInt8(ascii: "c"):
                    if HTTPSyntax.equalsLowercased(name, HTTPHeaderName.contentLength) {
                        failure = result.addContentLength(value)
                    } else if HTTPSyntax.equalsLowercased(name, HTTPHeaderName.connection) {
                        failure = result.addConnection(value)
                    }
                case UInt8(ascii: "t"):
                    if HTTPSyntax.equalsLowercased(name, HTTPHeaderName.transferEncoding) {
                        failure = result.addTransferEncoding(value)
                    }
                case UInt8(ascii: "h"):
                    if HTTPSyntax.equalsLowercased(name, HTTPHeaderName.host) {
                        result.hostCount += 1
                        if result.hostCount == 1 {
                            guard HeadFields.isValidHost(value) else {
                                failure = .badRequest("invalid_host")
                                return
                            }
                            result.hostValue = f.valueStart..<f.valueEnd
                        }
                    }
                case UInt8(ascii: "e"):
                    if HTTPSyntax.equalsLowercased(name, HTTPHeaderName.expect),
                       HTTPSyntax.equalsLowercased(value, "100-continue") {
                        result.expectContinue = true
                    }
                default:
                    break
                }
                if failure != nil { return }
            }
        }
        return failure
    }

    private mutating func addContentLength(_ value: UnsafeRawBufferPointer) -> HTTPParseError? {
        var elements = 0
        var failure: HTTPParseError?
        HTTPHeaders.forEachListElement(value) { element in
            elements += 1
            var parsed: Int64 = 0
            for byte in element {
                guard byte >= 0x30 && byte <= 0x39 else {
                    failure = .badRequest("invalid_content_length")
                    return false
                }
                let (times10, overflow1) = parsed.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times10.addingReportingOverflow(Int64(byte - 0x30))
                guard !overflow1 && !overflow2 else {
                    failure = .badRequest("content_length_overflow")
                    return false
                }
                parsed = sum
            }
            if let existing = contentLength, existing != parsed {
                failure = .badRequest("conflicting_content_length")
                return false
            }
            contentLength = parsed
            return true
        }
        if failure == nil && elements == 0 { failure = .badRequest("invalid_content_length") }
        return failure
    }

    private mutating func addConnection(_ value: UnsafeRawBufferPointer) -> HTTPParseError? {
        // The usual whole values, `keep-alive` and `close`, without the list walk.
        if connectionTokens.isEmpty {
            if HTTPSyntax.equalsLowercased(value, "keep-alive") {
                hasKeepAlive = true
                connectionTokens = Self.keepAliveOnly
                return nil
            }
            if HTTPSyntax.equalsLowercased(value, "close") {
                hasClose = true
                connectionTokens = Self.closeOnly
                return nil
            }
        }
        var failure: HTTPParseError?
        HTTPHeaders.forEachListElement(value) { element in
            guard HTTPSyntax.isToken(element) else {
                failure = .badRequest("invalid_connection")
                return false
            }
            // The two tokens nearly every message carries cost no allocation when alone (a shared one-element array).
            if HTTPSyntax.equalsLowercased(element, "keep-alive") {
                hasKeepAlive = true
                if connectionTokens.isEmpty { connectionTokens = Self.keepAliveOnly } else { connectionTokens.append("keep-alive") }
            } else if HTTPSyntax.equalsLowercased(element, "close") {
                hasClose = true
                if connectionTokens.isEmpty { connectionTokens = Self.closeOnly } else { connectionTokens.append("close") }
            } else {
                connectionTokens.append(String(unsafeUninitializedCapacity: element.count) { out in
                    for i in 0..<element.count { out[i] = HTTPSyntax.lowercased(element[i]) }
                    return element.count
                })
            }
            return true
        }
        return failure
    }

    private mutating func addTransferEncoding(_ value: UnsafeRawBufferPointer) -> HTTPParseError? {
        hasTransferEncoding = true
        var failure: HTTPParseError?
        HTTPHeaders.forEachListElement(value) { element in
            transferCodingElements += 1
            if HTTPSyntax.equalsLowercased(element, "chunked") {
                chunkedCount += 1
                lastCodingIsChunked = true
                return true
            }
            // transfer-coding = token *( OWS ";" OWS transfer-parameter ) (RFC 9112 §7): an unknown coding
            // only needs a valid name here; it is refused as a whole anyway.
            var index = 0
            while index < element.count, HTTPSyntax.isTChar(element[index]) { index += 1 }
            if index == 0 || (index < element.count && !HTTPSyntax.isWhitespace(element[index])
                              && element[index] != UInt8(ascii: ";")) {
                failure = .badRequest("invalid_transfer_encoding")
                return false
            }
            unknownCodings += 1
            lastCodingIsChunked = false
            return true
        }
        return failure
    }

    /// Whether the body is chunked, by the rules requests and responses share: false without `Transfer-Encoding`;
    /// with it, refused on HTTP/1.0 (RFC 9112 §6.1) and beside `Content-Length` (RFC 9112 §6.1 and §6.3 item 3 allow
    /// either to win; refusing closes the smuggling ambiguity), then `transferEncodingIsChunked`'s rules.
    func isChunked(versionMinor: Int) -> Result<Bool, HTTPParseError> {
        guard hasTransferEncoding else { return .success(false) }
        if versionMinor == 0 { return .failure(.badRequest("transfer_encoding_http10")) }
        if contentLength != nil { return .failure(.badRequest("content_length_with_transfer_encoding")) }
        return transferEncodingIsChunked()
    }

    /// The verdict on `Transfer-Encoding` (RFC 9112 §6.1, §6.3 item 4): `true` when it is exactly
    /// `chunked` (possibly over several fields), `false` when absent. Failures: no coding at all,
    /// `chunked` twice, or not last → 400; any other coding → 501.
    private func transferEncodingIsChunked() -> Result<Bool, HTTPParseError> {
        guard hasTransferEncoding else { return .success(false) }
        if transferCodingElements == 0 { return .failure(.badRequest("invalid_transfer_encoding")) }
        if chunkedCount > 1 { return .failure(.badRequest("chunked_repeated")) }
        if chunkedCount == 1 && !lastCodingIsChunked { return .failure(.badRequest("chunked_not_last")) }
        if unknownCodings > 0 { return .failure(.notImplemented("unsupported_transfer_coding")) }
        return .success(true)
    }

    /// Whether the connection persists after this message (RFC 9112 §9.3): HTTP/1.1 unless `close`;
    /// HTTP/1.0 only with `keep-alive` and without `close`.
    func keepAlive(versionMinor: Int) -> Bool {
        if hasClose { return false }
        return versionMinor >= 1 || hasKeepAlive
    }

    private static let keepAliveOnly = ["keep-alive"]
    private static let closeOnly = ["close"]

    /// `Host = uri-host [ ":" port ]` (RFC 9110 §7.2): only the characters of RFC 3986 §3.2.2
    /// (unreserved, sub-delims, `%`, `:`, `[`, `]`); no userinfo, whitespace or path. May be empty.
    static func isValidHost(_ value: UnsafeRawBufferPointer) -> Bool {
        for byte in value {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: continue
            case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): continue
            case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
                 UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
                 UInt8(ascii: "="): continue
            case UInt8(ascii: "%"), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"): continue
            default: return false
            }
        }
        return true
    }
}
