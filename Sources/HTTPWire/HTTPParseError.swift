/// Why an HTTP/1.x message (head, chunked body or trailers) was refused.
///
/// Every case maps to the status the gateway answers a client with (`status`) and a short, stable,
/// snake_case `reason` meant for logs and metrics. The reasons never contain bytes from the input, so they
/// are safe to log verbatim. When the failing message came from an upstream (response parsing), the caller
/// answers `502` instead; `status` is then only informative.
public enum HTTPParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `400 Bad Request`: the message violates the HTTP/1.1 grammar (RFC 9112) or an unsafe framing rule.
    case badRequest(String)
    /// `414 URI Too Long`: the request line has no CRLF within `HTTPParserLimits.maxRequestLineBytes`
    /// (RFC 9112 §3: a server that receives a request-target longer than it wishes to parse responds 414).
    case uriTooLong
    /// `431 Request Header Fields Too Large` (RFC 6585 §5): the head does not end within
    /// `maxHeadBytes`, has more than `maxHeaders` fields, or trailers exceed their bound.
    case headersTooLarge(String)
    /// `413 Content Too Large` (RFC 9110 §15.5.14): a chunked body exceeds the decoder's body limit.
    case bodyTooLarge
    /// `501 Not Implemented` (RFC 9112 §6.1): a transfer coding other than `chunked`.
    case notImplemented(String)
    /// `505 HTTP Version Not Supported` (RFC 9110 §15.6.6): a well-formed `HTTP/x.y` other than 1.0 and 1.1.
    case versionNotSupported

    /// The HTTP status code matching this error: 400, 413, 414, 431, 501 or 505.
    public var status: Int {
        switch self {
        case .badRequest: 400
        case .uriTooLong: 414
        case .headersTooLarge: 431
        case .bodyTooLarge: 413
        case .notImplemented: 501
        case .versionNotSupported: 505
        }
    }

    /// A short stable identifier of the rule that failed, e.g. `"bare_lf"` or `"too_many_headers"`.
    public var reason: String {
        switch self {
        case .badRequest(let reason), .headersTooLarge(let reason), .notImplemented(let reason): reason
        case .uriTooLong: "request_line_too_long"
        case .bodyTooLarge: "body_too_large"
        case .versionNotSupported: "http_version_not_supported"
        }
    }

    /// `"<status> <reason>"`, e.g. `"400 bare_cr"`.
    public var description: String { "\(status) \(reason)" }
}
