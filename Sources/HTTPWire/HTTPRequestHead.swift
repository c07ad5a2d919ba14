/// A parsed and validated HTTP/1.x request head (RFC 9112 §3, §5, §6).
///
/// Immutable, and a class: a request's head is handed from the parser to the connection, the exchange, admission and
/// the App Check step, and each hand-over of a struct of six reference-counted fields cost six retains and releases.
public final class HTTPRequestHead: Hashable, Sendable {
    /// The method, case preserved (RFC 9110 §9.1: methods are case-sensitive). Always a token.
    public let method: String
    /// The raw request-target (RFC 9112 §3.2), unmodified: 1 or more bytes in 0x21–0x7E.
    public let target: String
    /// `0` for HTTP/1.0, `1` for HTTP/1.1; other versions never get this far.
    public let versionMinor: Int
    /// All header fields, in arrival order.
    public let headers: HTTPHeaders
    /// How the body is delimited (RFC 9112 §6.3).
    public let framing: RequestBodyFraming
    /// Whether the connection may be reused after this request (RFC 9112 §9.3): HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive` and without `close`.
    public let keepAlive: Bool
    /// `Expect: 100-continue` on an HTTP/1.1 request (RFC 9110 §10.1.1; ignored on HTTP/1.0 as required).
    public let expectContinue: Bool
    /// Lower-cased tokens of all `Connection` fields, in order: the extra hop-by-hop fields to remove
    /// before forwarding (RFC 9110 §7.6.1).
    public let connectionTokens: [String]
    /// The value of the single `Host` field (RFC 9110 §7.2), possibly empty; `nil` for an HTTP/1.0
    /// request without one. Made when read (the proxy forwards the field's bytes and never asks).
    public var host: String? {
        if let hostText { return hostText }
        guard let hostValue else { return nil }
        return headers.bytes.withUnsafeBytes {
            String(decoding: UnsafeRawBufferPointer(rebasing: $0[Int(hostValue.lowerBound)..<Int(hostValue.upperBound)]),
                   as: UTF8.self)
        }
    }
    /// `host` as given to the public initializer.
    private let hostText: String?
    /// `host` as the parser found it: the range of the value in `headers.bytes`.
    private let hostValue: Range<Int32>?

    /// Creates a head; the parser is the normal source.
    public convenience init(
        method: String, target: String, versionMinor: Int, headers: HTTPHeaders,
        framing: RequestBodyFraming, keepAlive: Bool, expectContinue: Bool,
        connectionTokens: [String], host: String?
    ) {
        self.init(method: method, target: target, versionMinor: versionMinor, headers: headers, framing: framing,
                  keepAlive: keepAlive, expectContinue: expectContinue, connectionTokens: connectionTokens,
                  hostText: host, hostValue: nil)
    }

    /// The designated initializer; the parser calls it with `hostText` nil and `hostValue` the range of the `Host`
    /// value in `headers.bytes` (inside it).
    init(
        method: String, target: String, versionMinor: Int, headers: HTTPHeaders,
        framing: RequestBodyFraming, keepAlive: Bool, expectContinue: Bool,
        connectionTokens: [String], hostText: String?, hostValue: Range<Int32>?
    ) {
        self.method = method
        self.target = target
        self.versionMinor = versionMinor
        self.headers = headers
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectContinue = expectContinue
        self.connectionTokens = connectionTokens
        self.hostText = hostText
        self.hostValue = hostValue
    }

    public static func == (lhs: HTTPRequestHead, rhs: HTTPRequestHead) -> Bool {
        lhs === rhs || (lhs.method == rhs.method && lhs.target == rhs.target && lhs.versionMinor == rhs.versionMinor
            && lhs.headers == rhs.headers && lhs.framing == rhs.framing && lhs.keepAlive == rhs.keepAlive
            && lhs.expectContinue == rhs.expectContinue && lhs.connectionTokens == rhs.connectionTokens
            && lhs.host == rhs.host)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(method)
        hasher.combine(target)
        hasher.combine(versionMinor)
        hasher.combine(headers)
        hasher.combine(framing)
        hasher.combine(keepAlive)
        hasher.combine(expectContinue)
        hasher.combine(connectionTokens)
        hasher.combine(host)
    }
}
