/// What a DPoP proof must match (RFC 9449 §4.3 checks 8–12, SPEC §4.4): the request it came with, the token it
/// accompanies, and the time window.
public struct DPoPRequest: Sendable {
    /// The request method, compared byte for byte with `htm`.
    public var method: String
    /// `http` or `https`: the listener's scheme, or `X-Forwarded-Proto` of a trusted proxy.
    public var scheme: String
    /// `Host` / `:authority` as the client sent it (compared ASCII case-insensitively, a default port ignored).
    public var authority: String
    /// The path as sent, without query and fragment (compared byte for byte).
    public var path: String
    /// The access token the proof accompanies (its `ath` must be base64url(SHA-256(token))); nil at the issuer's
    /// exchange, where no token exists yet and `ath` is not checked.
    public var accessToken: [UInt8]?
    /// The `ath` the proof must carry when the caller has it already: `DPoPRequest.ath(of:)` of the token, computed once
    /// for a cached token and kept with it. When set it is used instead of hashing `accessToken` (which may then be
    /// nil); nil with `accessToken` nil means no token (the issuer's exchange).
    public var accessTokenHash: String?
    /// The token's `cnf.jkt`, which the proof key's thumbprint must equal; nil at the issuer's exchange (any key binds).
    public var thumbprint: String?
    /// How old `iat` may be, seconds (route key `dpop_max_age`, default 60).
    public var maxAge: Double
    /// Tolerated clock difference, seconds, on both ends of the `iat` window.
    public var clockSkew: Double

    public init(method: String, scheme: String, authority: String, path: String, accessToken: [UInt8]?,
                thumbprint: String?, maxAge: Double = 60, clockSkew: Double, accessTokenHash: String? = nil) {
        self.method = method; self.scheme = scheme; self.authority = authority; self.path = path
        self.accessToken = accessToken; self.thumbprint = thumbprint; self.maxAge = maxAge; self.clockSkew = clockSkew
        self.accessTokenHash = accessTokenHash
    }

    /// The `ath` of a proof for `token` (RFC 9449 §4.2): base64url(SHA-256(token)), no padding.
    public static func ath<Bytes: Collection>(of token: Bytes) -> String where Bytes.Element == UInt8 {
        Base64URL.encode(SHA256Digest.hash(token))
    }

    /// The target of a request line: the path as sent (before `?` and `#`) and, for an absolute-form target
    /// (RFC 9112 §3.2.2), its authority, which overrides `Host`.
    public static func split(target: String) -> (authority: String?, path: String) {
        var rest = Substring(target)
        var authority: String?
        if !rest.hasPrefix("/"), let schemeEnd = schemeSeparator(rest) {
            let afterScheme = rest[schemeEnd.upperBound...]
            let end: Substring.Index = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" })
                ?? afterScheme.endIndex
            authority = String(afterScheme[..<end])
            rest = afterScheme[end...]
        }
        let pathEnd = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let path = rest[..<pathEnd]
        return (authority, path.isEmpty ? "/" : String(path))
    }

    /// True when `htu` names this request (RFC 9449 §4.3 check 9): `scheme://authority/path` with no query and no
    /// fragment (a proof that carries either is refused: the SPEC's `htu` is the URI without them); scheme and host
    /// compared ASCII case-insensitively and a port equal to the scheme's default ignored (RFC 3986 §6.2.2.1,
    /// §6.2.3); the path byte for byte, an empty one being `/`. No userinfo.
    public func matches(htu: String) -> Bool {
        let utf8 = htu.utf8
        guard !utf8.contains(UInt8(ascii: "?")), !utf8.contains(UInt8(ascii: "#")),
              let schemeEnd = Self.schemeSeparator(Substring(htu)) else { return false }
        let scheme = Substring(htu)[..<schemeEnd.lowerBound].lowercased()
        guard scheme == self.scheme.lowercased() else { return false }
        let rest = Substring(htu)[schemeEnd.upperBound...]
        let slash = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<slash]
        guard !authority.isEmpty, !authority.contains("@") else { return false }
        let path = rest[slash...].isEmpty ? "/" : String(rest[slash...])
        return Self.normalAuthority(String(authority), scheme: scheme) == Self.normalAuthority(self.authority, scheme: scheme)
            && utf8Equal(path, self.path)
    }

    /// The range of the first `://` in `text`.
    static func schemeSeparator(_ text: Substring) -> Range<Substring.Index>? {
        var i = text.startIndex
        while i < text.endIndex {
            if text[i...].hasPrefix("://") { return i..<text.index(i, offsetBy: 3) }
            i = text.index(after: i)
        }
        return nil
    }

    /// Lowercase, without a port equal to the scheme's default (`:80` for http, `:443` for https).
    static func normalAuthority(_ authority: String, scheme: String) -> String {
        let lower = authority.lowercased()
        let defaultPort = scheme == "https" ? ":443" : scheme == "http" ? ":80" : nil
        if let defaultPort, lower.hasSuffix(defaultPort) { return String(lower.dropLast(defaultPort.count)) }
        return lower
    }
}
