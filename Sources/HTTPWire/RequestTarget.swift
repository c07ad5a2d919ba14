/// A request-target split into a normalised path and the raw query (RFC 9112 §3.2).
///
/// Routing happens on the normalised path and the normalised path is what the upstream receives, so a
/// path that looks different to the gateway and to the upstream cannot pick a weaker route:
/// percent-encoded unreserved characters are decoded (RFC 3986 §6.2.2.2), remaining escapes are
/// upper-cased, dot-segments are removed (RFC 3986 §5.2.4) and repeated slashes merged. Encoded `/`,
/// `\` and NUL (`%2F`, `%5C`, `%00`), a raw `\`, and a path that climbs above the root are refused
/// because upstreams disagree on what they mean.
public struct RequestTarget: Equatable, Sendable {
    public var path: String
    /// The query without its `?`, or nil when there was no `?`.
    public var query: Substring?
    /// Host from an absolute-form target (RFC 9112 §3.2.2), which overrides the Host header.
    public var absoluteHost: String?

    public enum Failure: Error, Equatable {
        case invalid(String)
    }

    public static func parse(_ target: String) -> Result<RequestTarget, Failure> {
        // The usual request: an origin-form target already in normal form. Its path is the target itself (or the part
        // before `?`), its bytes read in place (no `Character` work, no iterator over the string's UTF-8 view), and no
        // copy when there is no query. `pathEnd`: the offset of `?` (the count when none), nil when not that form.
        let pathEnd: Int?? = target.utf8.withContiguousStorageIfAvailable { bytes -> Int? in
            guard bytes.first == UInt8(ascii: "/") else { return nil }
            let q = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.count
            return isAlreadyNormal(UnsafeBufferPointer(rebasing: bytes[0..<q])) ? q : nil
        }
        if let pathEnd, let end = pathEnd {
            let utf8 = target.utf8
            if end == utf8.count { return .success(RequestTarget(path: target, query: nil, absoluteHost: nil)) }
            let q = utf8.index(utf8.startIndex, offsetBy: end)
            return .success(RequestTarget(path: String(target[target.startIndex..<q]), query: target[utf8.index(after: q)...],
                                          absoluteHost: nil))
        }
        var rest = Substring(target)
        var absoluteHost: String?
        if rest.utf8.first != UInt8(ascii: "/") {
            let lower = rest.prefix(8).lowercased()
            let schemeLength: Int
            if lower.hasPrefix("http://") { schemeLength = 7 } else if lower.hasPrefix("https://") { schemeLength = 8 } else {
                return .failure(.invalid("unsupported_request_target"))
            }
            rest = rest.dropFirst(schemeLength)
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            let authority = rest[rest.startIndex..<authorityEnd]
            if authority.isEmpty || authority.contains("@") { return .failure(.invalid("invalid_authority")) }
            absoluteHost = String(authority)
            rest = rest[authorityEnd...]
            if rest.isEmpty || rest.hasPrefix("?") { rest = "/" + rest }
        }
        var pathPart = rest
        var query: Substring?
        if let q = rest.firstIndex(of: "?") {
            pathPart = rest[rest.startIndex..<q]
            query = rest[rest.index(after: q)...]
        }
        guard let path = normalize(pathPart) else { return .failure(.invalid("invalid_path")) }
        return .success(RequestTarget(path: path, query: query, absoluteHost: absoluteHost))
    }

    /// Normalises an origin-form path; nil when it must be refused.
    public static func normalize(_ raw: Substring) -> String? {
        if isAlreadyNormal(raw) { return String(raw) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.utf8.count)
        var it = raw.utf8.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "\\") { return nil }
            if b == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                let v = hv << 4 | lv
                if v == 0x2F || v == 0x5C || v == 0 { return nil }
                if isUnreserved(v) {
                    bytes.append(v)
                } else {
                    bytes.append(UInt8(ascii: "%"))
                    bytes.append(upperHex(hv))
                    bytes.append(upperHex(lv))
                }
                continue
            }
            bytes.append(b)
        }
        // Segments, with dot-segment removal and empty segments merged.
        var out: [ArraySlice<UInt8>] = []
        var trailingSlash = false
        for segment in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst() {
            trailingSlash = false
            if segment.isEmpty { trailingSlash = true; continue }
            if segment.elementsEqual([UInt8(ascii: ".")]) { trailingSlash = true; continue }
            if segment.elementsEqual([UInt8(ascii: "."), UInt8(ascii: ".")]) {
                if out.isEmpty { return nil }
                out.removeLast()
                trailingSlash = true
                continue
            }
            out.append(segment)
        }
        var result: [UInt8] = [UInt8(ascii: "/")]
        for (i, segment) in out.enumerated() {
            if i > 0 { result.append(UInt8(ascii: "/")) }
            result.append(contentsOf: segment)
        }
        if trailingSlash && !out.isEmpty { result.append(UInt8(ascii: "/")) }
        return String(decoding: result, as: UTF8.self)
    }

    /// The common case, checked without allocating: no `%`, no `\`, no empty, `.` or `..` segment.
    private static func isAlreadyNormal(_ raw: Substring) -> Bool { isAlreadyNormal(raw.utf8) }

    /// The same test over the path's bytes.
    private static func isAlreadyNormal<Bytes: Collection<UInt8>>(_ raw: Bytes) -> Bool {
        var previous: UInt8 = 0
        var dots = 0
        for b in raw {
            switch b {
            case UInt8(ascii: "%"), UInt8(ascii: "\\"): return false
            case UInt8(ascii: "/"):
                if previous == UInt8(ascii: "/") || dots > 0 { return false }
            case UInt8(ascii: "."):
                if previous == UInt8(ascii: "/") || dots > 0 { dots += 1 } else { dots = 0 }
                previous = b
                continue
            default: break
            }
            if b != UInt8(ascii: ".") { dots = 0 }
            previous = b
        }
        return dots == 0 && raw.first == UInt8(ascii: "/")
    }

    /// The value of one hexadecimal digit, or nil.
    public static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    private static func upperHex(_ v: UInt8) -> UInt8 { v < 10 ? UInt8(ascii: "0") + v : UInt8(ascii: "A") + v - 10 }

    private static func isUnreserved(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
             UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}
