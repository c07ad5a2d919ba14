import Glibc

/// What a DPoP proof must match (RFC 9449 §4.3 checks 8–12, SPEC §4.4): the request it came with, the token it
/// accompanies, and the time window.
public struct DPoPRequest: Sendable {
    /// The request method, compared byte for byte with `htm`.
    public var method: String
    /// `http` or `https`: the listener's scheme, or `X-Forwarded-Proto` of a trusted proxy.
    public var scheme: String
    /// `Host` / `:authority` as the client sent it (compared ASCII case-insensitively, a default port ignored).
    public var authority: String
    /// The path as sent, without query and fragment (compared byte for byte); unused when `target` is set.
    public var path: String
    /// The request target as sent (origin form, or absolute form whose authority overrides `authority`), when the
    /// caller gave it instead of `path` (`init(method:scheme:host:target:…)`): the path and authority are then taken
    /// from its bytes when `htu` is compared, as `split(target:)` would take them, with no String made per request.
    public var target: String?
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

    /// A request by its target as sent and its `Host` (or `:authority`): `split(target:)`'s path and authority,
    /// read in place when `htu` is compared. No access token: `accessTokenHash` is the `ath` to check, if any.
    public init(method: String, scheme: String, host: String, target: String, thumbprint: String?, maxAge: Double = 60,
                clockSkew: Double, accessTokenHash: String?) {
        self.method = method; self.scheme = scheme; self.authority = host; self.path = ""; self.target = target
        self.accessToken = nil; self.thumbprint = thumbprint; self.maxAge = maxAge; self.clockSkew = clockSkew
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
        // Byte by byte over the four strings' UTF-8, no String made (with lowercased() copies this cost ~13,000
        // instructions per proof).
        var htu = htu, scheme = scheme, authority = authority, path = path
        return htu.withUTF8 { u in
            scheme.withUTF8 { s in
                authority.withUTF8 { a in path.withUTF8 { p in Self.matches(htu: u, scheme: s, authority: a, path: p) } }
            }
        }
    }

    /// `matches(htu:)` on the UTF-8 bytes of `htu`.
    func matches(htu: UnsafeBufferPointer<UInt8>) -> Bool {
        var scheme = scheme, authority = authority
        guard var target else {
            var path = path
            return scheme.withUTF8 { s in
                authority.withUTF8 { a in path.withUTF8 { p in Self.matches(htu: htu, scheme: s, authority: a, path: p) } }
            }
        }
        let matched: Bool? = target.withUTF8 { t in
            guard let (absolute, path) = Self.targetParts(t) else { return nil }
            return scheme.withUTF8 { s in
                if path.isEmpty {
                    // An empty path is "/".
                    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1) { slash in
                        slash[0] = UInt8(ascii: "/")
                        let p = UnsafeBufferPointer(slash)
                        if let absolute { return Self.matches(htu: htu, scheme: s, authority: UnsafeBufferPointer(rebasing: t[absolute]), path: p) }
                        return authority.withUTF8 { Self.matches(htu: htu, scheme: s, authority: $0, path: p) }
                    }
                }
                let p = UnsafeBufferPointer(rebasing: t[path])
                if let absolute { return Self.matches(htu: htu, scheme: s, authority: UnsafeBufferPointer(rebasing: t[absolute]), path: p) }
                return authority.withUTF8 { Self.matches(htu: htu, scheme: s, authority: $0, path: p) }
            }
        }
        if let matched { return matched }
        // A target with bytes beyond ASCII: split as Characters, as `split(target:)` does.
        let (absolute, path) = Self.split(target: target)
        var request = self
        request.target = nil
        request.authority = absolute ?? authority
        request.path = path
        return request.matches(htu: htu)
    }

    /// `split(target:)` on the bytes of an ASCII target: the range of an absolute-form target's authority (after the
    /// first `://` of a target not starting with `/`, up to the next `/`, `?` or `#`), and of the path after it (up
    /// to the first `?` or `#`; empty means `/`). Nil when a byte is not ASCII (Characters could then differ from
    /// bytes: a combining mark after `/`).
    static func targetParts(_ t: UnsafeBufferPointer<UInt8>) -> (authority: Range<Int>?, path: Range<Int>)? {
        var separator = -1, pathStart = 0
        let slash = UInt8(ascii: "/")
        let absoluteForm = t.first != slash
        for i in 0..<t.count {
            let byte = t[i]
            if byte >= 0x80 { return nil }
            if absoluteForm && separator < 0 && byte == UInt8(ascii: ":") && i + 2 < t.count && t[i + 1] == slash
                && t[i + 2] == slash {
                separator = i
            }
        }
        var authority: Range<Int>? = nil
        if separator >= 0 {
            let start = separator + 3
            var end = start
            while end < t.count, t[end] != slash, t[end] != UInt8(ascii: "?"), t[end] != UInt8(ascii: "#") { end += 1 }
            authority = start..<end
            pathStart = end
        }
        var pathEnd = pathStart
        while pathEnd < t.count, t[pathEnd] != UInt8(ascii: "?"), t[pathEnd] != UInt8(ascii: "#") { pathEnd += 1 }
        return (authority, pathStart..<pathEnd)
    }

    static func matches(htu u: UnsafeBufferPointer<UInt8>, scheme: UnsafeBufferPointer<UInt8>,
                        authority: UnsafeBufferPointer<UInt8>, path: UnsafeBufferPointer<UInt8>) -> Bool {
        let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")
        // No query, no fragment; the scheme ends at the first "://". By memchr (a byte loop cost ~10 instructions
        // a byte of `htu`).
        guard let base = u.baseAddress else { return false }
        let raw = UnsafeRawPointer(base)
        if memchr(raw, Int32(UInt8(ascii: "?")), u.count) != nil || memchr(raw, Int32(UInt8(ascii: "#")), u.count) != nil {
            return false
        }
        var separator = -1
        var from = 0
        while from < u.count, let hit = memchr(raw + from, Int32(colon), u.count - from) {
            let i = raw.distance(to: UnsafeRawPointer(hit))
            if i + 2 < u.count && u[i + 1] == slash && u[i + 2] == slash {
                separator = i
                break
            }
            from = i + 1
        }
        guard separator >= 0, asciiEqualIgnoringCase(u, 0..<separator, scheme, 0..<scheme.count) else { return false }
        let authorityStart = separator + 3
        var pathStart = authorityStart
        while pathStart < u.count && u[pathStart] != slash { pathStart += 1 }
        guard pathStart > authorityStart, !u[authorityStart..<pathStart].contains(UInt8(ascii: "@")) else { return false }
        // A port equal to the scheme's default is ignored on both sides.
        let defaultPort: StaticString? = asciiEqualIgnoringCase(scheme, 0..<scheme.count, "https") ? ":443"
            : asciiEqualIgnoringCase(scheme, 0..<scheme.count, "http") ? ":80" : nil
        let theirs = withoutPort(u, authorityStart..<pathStart, defaultPort)
        let ours = withoutPort(authority, 0..<authority.count, defaultPort)
        guard asciiEqualIgnoringCase(u, theirs, authority, ours) else { return false }
        // The path byte for byte, an empty one being "/".
        if pathStart == u.count { return path.count == 1 && path[0] == slash }
        return bytesEqual(UnsafeBufferPointer(rebasing: u[pathStart...]), path)
    }

    /// `range` of `bytes` without a trailing `port` (`:443`, `:80`).
    private static func withoutPort(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ port: StaticString?) -> Range<Int> {
        guard let port else { return range }
        let count = port.utf8CodeUnitCount
        guard range.count >= count else { return range }
        let start = range.upperBound - count
        for i in 0..<count where bytes[start + i] != port.utf8Start[i] { return range }
        return range.lowerBound..<start
    }

    /// `a[ra]` and `b[rb]` equal, ASCII letters compared without regard to case.
    private static func asciiEqualIgnoringCase(_ a: UnsafeBufferPointer<UInt8>, _ ra: Range<Int>,
                                               _ b: UnsafeBufferPointer<UInt8>, _ rb: Range<Int>) -> Bool {
        guard ra.count == rb.count else { return false }
        for i in 0..<ra.count where asciiLower(a[ra.lowerBound + i]) != asciiLower(b[rb.lowerBound + i]) { return false }
        return true
    }

    private static func asciiEqualIgnoringCase(_ a: UnsafeBufferPointer<UInt8>, _ ra: Range<Int>, _ b: StaticString) -> Bool {
        asciiEqualIgnoringCase(a, ra, UnsafeBufferPointer(start: b.utf8Start, count: b.utf8CodeUnitCount),
                               0..<b.utf8CodeUnitCount)
    }

    private static func asciiLower(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
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
}
