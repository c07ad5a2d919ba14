/// How long a fetched key set counts as fresh (docs/behaviour.md: `min(Cache-Control max-age, jwks.max_age)`).
///
/// - `max-age=N` (RFC 9111 §5.2.2.1; a quoted value is tolerated): `min(N, maxAge)`.
/// - No `Cache-Control`, no `max-age`, or an invalid or repeated one: `maxAge`.
/// - `no-store`, `no-cache` or `max-age=0`: the server asks not to reuse the document, but the gateway must
///   verify with some set. It is kept for `min(unknownKidRefreshInterval, maxAge)`, so such a server is asked
///   at most once per `unknown_kid_refresh_interval` — the spec's own bound on refetches.
enum KeySetLifetime {
    /// The parsed directives that matter here.
    enum Directive: Equatable {
        case absent
        case maxAge(Double)
        case doNotReuse
    }

    /// Reads the `Cache-Control` field values (each a comma-separated list, RFC 9110 §5.6.1).
    static func directive(_ values: [String]) -> Directive {
        var maxAges: [Double?] = []
        var doNotReuse = false
        for value in values {
            for part in value.split(separator: ",") {
                let item = part.trimmedSpaces()
                let pieces = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = pieces[0].trimmedSpaces().lowercased()
                switch name {
                case "no-store", "no-cache":
                    doNotReuse = true
                case "max-age":
                    guard pieces.count == 2 else { maxAges.append(nil); continue }
                    var text = pieces[1].trimmedSpaces()
                    if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") { text = String(text.dropFirst().dropLast()) }
                    if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                        // RFC 9111 §1.2.2: a delta-seconds too large to represent is taken as 2^31.
                        maxAges.append(Double(text.count > 10 ? "2147483648" : text).map { min($0, 2147483648) })
                    } else {
                        maxAges.append(nil)
                    }
                default:
                    continue
                }
            }
        }
        if doNotReuse { return .doNotReuse }
        guard maxAges.count == 1, let seconds = maxAges[0] else { return .absent }
        return seconds == 0 ? .doNotReuse : .maxAge(seconds)
    }

    /// The lifetime in seconds for `settings` and the response's `Cache-Control` values.
    static func seconds(cacheControl values: [String], settings: JWKSSettings) -> Double {
        let cap = max(0, settings.maxAge)
        switch directive(values) {
        case .absent: return cap
        case .maxAge(let seconds): return min(seconds, cap)
        case .doNotReuse: return min(max(0, settings.unknownKidRefreshInterval), cap)
        }
    }
}

extension StringProtocol {
    fileprivate func trimmedSpaces() -> String {
        let chars: Set<Character> = [" ", "\t"]
        var s = Substring(self)
        while let f = s.first, chars.contains(f) { s = s.dropFirst() }
        while let l = s.last, chars.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
