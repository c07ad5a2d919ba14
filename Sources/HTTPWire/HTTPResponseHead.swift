/// A parsed and validated HTTP/1.x response head from an upstream (RFC 9112 §4, §5, §6).
///
/// Immutable, and a class for the same reason as `HTTPRequestHead`: it is handed along (parser, upstream connection,
/// exchange, responder) without retaining each of its fields at every step.
public final class HTTPResponseHead: Hashable, Sendable {
    /// The status code, 100–599 (RFC 9110 §15).
    public let status: Int
    /// Where the reason phrase lies in `headers.bytes` (the head's first line), possibly empty.
    public let reasonRange: Range<Int>
    /// The reason phrase, possibly empty (RFC 9112 §4: clients should ignore it). Made on demand; the HTTP/1.1 writer
    /// copies its bytes instead (`withReasonBytes`).
    public var reason: String { withReasonBytes { String(decoding: $0, as: UTF8.self) } }

    /// Calls `body` with the reason phrase's bytes, as received.
    public func withReasonBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try headers.bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[reasonRange])) }
    }
    /// `0` for HTTP/1.0, `1` for HTTP/1.1.
    public let versionMinor: Int
    /// All header fields, in arrival order.
    public let headers: HTTPHeaders
    /// The agreed `Content-Length`, when present (RFC 9110 §8.6).
    public let contentLength: Int64?
    /// Whether `Transfer-Encoding: chunked` is present (the only transfer coding accepted).
    public let isChunked: Bool
    /// Lower-cased tokens of all `Connection` fields (RFC 9110 §7.6.1).
    public let connectionTokens: [String]
    /// Whether the upstream connection may be reused according to the version and `Connection`
    /// (RFC 9112 §9.3). The caller must also not reuse it when `framing(requestMethod:)` is `.untilClose`.
    public let keepAlive: Bool

    /// Creates a head; the parser is the normal source.
    public init(
        status: Int, reasonRange: Range<Int>, versionMinor: Int, headers: HTTPHeaders, contentLength: Int64?,
        isChunked: Bool, connectionTokens: [String], keepAlive: Bool
    ) {
        self.status = status
        // A range outside the bytes (never from the parser) is taken as an empty phrase rather than trusted.
        self.reasonRange = reasonRange.upperBound <= headers.bytes.count ? reasonRange : 0..<0
        self.versionMinor = versionMinor
        self.headers = headers
        self.contentLength = contentLength
        self.isChunked = isChunked
        self.connectionTokens = connectionTokens
        self.keepAlive = keepAlive
    }

    public static func == (lhs: HTTPResponseHead, rhs: HTTPResponseHead) -> Bool {
        lhs === rhs || (lhs.status == rhs.status && lhs.reason == rhs.reason && lhs.versionMinor == rhs.versionMinor
            && lhs.headers == rhs.headers && lhs.contentLength == rhs.contentLength && lhs.isChunked == rhs.isChunked
            && lhs.connectionTokens == rhs.connectionTokens && lhs.keepAlive == rhs.keepAlive)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(reasonRange)
        hasher.combine(versionMinor)
        hasher.combine(headers)
        hasher.combine(contentLength)
        hasher.combine(isChunked)
        hasher.combine(connectionTokens)
        hasher.combine(keepAlive)
    }

    /// Whether this is an interim (1xx) response, after which the final response follows (RFC 9110 §15.2).
    public var isInformational: Bool { status < 200 }

    /// How the body of this response is delimited, given the method of the request it answers
    /// (RFC 9112 §6.3): `.none` for `HEAD`, 1xx, 204 and 304 (item 1) and for a 2xx to `CONNECT`
    /// (item 2); `.chunked` (item 4); `.contentLength` (item 6); otherwise `.untilClose` (item 8).
    /// `requestMethod` is compared case-sensitively, as methods are (RFC 9110 §9.1).
    public func framing(requestMethod: String) -> ResponseBodyFraming {
        if HTTPSyntax.isMethod(requestMethod, "HEAD") || (100..<200).contains(status) || status == 204 || status == 304 {
            return .none
        }
        if HTTPSyntax.isMethod(requestMethod, "CONNECT") && (200..<300).contains(status) { return .none }
        if isChunked { return .chunked }
        if let contentLength { return .contentLength(contentLength) }
        return .untilClose
    }
}
