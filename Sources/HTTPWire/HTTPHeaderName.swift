/// Lower-case names of header fields the codec and the proxy treat specially.
public enum HTTPHeaderName {
    /// `connection` (RFC 9110 §7.6.1).
    public static let connection: StaticString = "connection"
    /// `content-length` (RFC 9110 §8.6).
    public static let contentLength: StaticString = "content-length"
    /// `transfer-encoding` (RFC 9112 §6.1).
    public static let transferEncoding: StaticString = "transfer-encoding"
    /// `host` (RFC 9110 §7.2).
    public static let host: StaticString = "host"
    /// `expect` (RFC 9110 §10.1.1).
    public static let expect: StaticString = "expect"
    /// `keep-alive` (RFC 2068 §19.7.1, listed as hop-by-hop in RFC 9110 §7.6.1).
    public static let keepAlive: StaticString = "keep-alive"
    /// `upgrade` (RFC 9110 §7.8).
    public static let upgrade: StaticString = "upgrade"

    /// The hop-by-hop fields a proxy removes before forwarding (RFC 9110 §7.6.1), lower case:
    /// `connection`, `proxy-connection`, `keep-alive`, `te`, `transfer-encoding`, `upgrade`,
    /// `proxy-authenticate`, `proxy-authorization`, `trailer`. Fields named in `Connection`
    /// (`connectionTokens` of a head) must be removed as well.
    public static let hopByHop: [String] = [
        "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authorization", "trailer",
    ]

    /// Whether a lower-case field name is one of `hopByHop`.
    public static func isHopByHop(_ lowercasedName: String) -> Bool {
        hopByHop.contains(lowercasedName)
    }

    /// Whether raw field-name bytes (any case) name a connection-specific field that HTTP/2 forbids (RFC 9113
    /// §8.2.2): `connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`. By length first;
    /// does not allocate. (`te` is allowed in requests with the value `trailers`; callers judge it.)
    public static func isConnectionSpecific(_ name: UnsafeRawBufferPointer) -> Bool {
        switch name.count {
        case 7: return HTTPSyntax.equalsLowercased(name, "upgrade")
        case 10: return HTTPSyntax.equalsLowercased(name, "connection") || HTTPSyntax.equalsLowercased(name, "keep-alive")
        case 16: return HTTPSyntax.equalsLowercased(name, "proxy-connection")
        case 17: return HTTPSyntax.equalsLowercased(name, "transfer-encoding")
        default: return false
        }
    }

    /// Whether raw field-name bytes (any case) are one of `hopByHop`. Does not allocate.
    public static func isHopByHop(_ name: UnsafeRawBufferPointer) -> Bool {
        for candidate in hopByHop where HTTPSyntax.equalsLowercased(name, string: candidate) { return true }
        return false
    }
}
