/// `replay.redis_url`: `redis://[[user]:password@]host[:port][/db]` (port 6379 and db 0 by default; user and
/// password percent-decoded; IPv6 hosts in brackets). `rediss://` is refused until TLS to Redis exists.
struct RedisEndpoint: Sendable, Equatable {
    var host: String
    var port: UInt16
    var user: String?
    var password: String?
    var db: Int

    static func parse(_ url: String) throws -> RedisEndpoint {
        func bad(_ why: String) -> ReplayStoreError { ReplayStoreError("replay.redis_url: \(why)") }
        if url.lowercased().hasPrefix("rediss://") {
            throw bad("rediss:// needs TLS support, not yet available")
        }
        guard url.lowercased().hasPrefix("redis://") else { throw bad("must start with redis://") }
        var rest = Substring(url.dropFirst("redis://".count))
        guard !rest.contains("?"), !rest.contains("#") else { throw bad("query and fragment are not supported") }
        var db = 0
        if let slash = rest.firstIndex(of: "/") {
            let path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !path.isEmpty {
                guard path.allSatisfy({ $0.isASCII && $0.isNumber }), path.count <= 5, let n = Int(path) else {
                    throw bad("database must be a number, got \"\(path)\"")
                }
                db = n
            }
        }
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let info = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = info.firstIndex(of: ":") else {
                throw bad("credentials must be user:password@ or :password@")
            }
            let u = String(info[..<colon])
            let p = String(info[info.index(after: colon)...])
            guard let ud = u.removingPercentEncoding, let pd = p.removingPercentEncoding else {
                throw bad("bad percent-encoding in credentials")
            }
            user = ud.isEmpty ? nil : ud
            guard !pd.isEmpty else { throw bad("empty password") }
            password = pd
        }
        var host: String
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("unterminated [ in host") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("junk after ]") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
        } else {
            host = String(rest)
        }
        guard !host.isEmpty else { throw bad("missing host") }
        var port: UInt16 = 6379
        if let portText {
            guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let p = UInt16(portText), p > 0 else {
                throw bad("bad port \"\(portText)\"")
            }
            port = p
        }
        return RedisEndpoint(host: host, port: port, user: user, password: password, db: db)
    }
}
