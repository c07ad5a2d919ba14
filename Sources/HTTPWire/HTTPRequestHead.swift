/// A parsed and validated HTTP/1.x request head (RFC 9112 §3, §5, §6).
public struct HTTPRequestHead: Hashable, Sendable {
    /// The method, case preserved (RFC 9110 §9.1: methods are case-sensitive). Always a token.
    public var method: String
    /// The raw request-target (RFC 9112 §3.2), unmodified: 1 or more bytes in 0x21–0x7E.
    public var target: String
    /// `0` for HTTP/1.0, `1` for HTTP/1.1; other versions never get this far.
    public var versionMinor: Int
    /// All header fields, in arrival order.
    public var headers: HTTPHeaders
    /// How the body is delimited (RFC 9112 §6.3).
    public var framing: RequestBodyFraming
    /// Whether the connection may be reused after this request (RFC 9112 §9.3): HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive` and without `close`.
    public var keepAlive: Bool
    /// `Expect: 100-continue` on an HTTP/1.1 request (RFC 9110 §10.1.1; ignored on HTTP/1.0 as required).
    public var expectContinue: Bool
    /// Lower-cased tokens of all `Connection` fields, in order: the extra hop-by-hop fields to remove
    /// before forwarding (RFC 9110 §7.6.1).
    public var connectionTokens: [String]
    /// The value of the single `Host` field (RFC 9110 §7.2), possibly empty; `nil` for an HTTP/1.0
    /// request without one.
    public var host: String?

    /// Creates a head; the parser is the normal source.
    public init(
        method: String, target: String, versionMinor: Int, headers: HTTPHeaders,
        framing: RequestBodyFraming, keepAlive: Bool, expectContinue: Bool,
        connectionTokens: [String], host: String?
    ) {
        self.method = method
        self.target = target
        self.versionMinor = versionMinor
        self.headers = headers
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectContinue = expectContinue
        self.connectionTokens = connectionTokens
        self.host = host
    }
}
