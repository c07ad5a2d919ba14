import Foundation

/// `replay.redis_url`, one of:
///
/// - `redis://[[user]:password@]host[:port][/db]` — one server, plain TCP;
/// - `rediss://[[user]:password@]host[:port][/db][?ca_file=/path/ca.pem]` — one server over TLS: the chain is
///   verified against `ca_file` (PEM; default the system store) and the certificate must name `host`;
/// - `redis+cluster://[[user]:password@]host:port,host:port,…` (or `rediss+cluster://…?ca_file=`) — Redis
///   Cluster / Valkey cluster: the listed nodes are seeds for `CLUSTER SLOTS`; db must be 0.
///
/// Port 6379 and db 0 by default; user, password and `ca_file` percent-decoded; IPv6 hosts in brackets.
/// `user` without a password is refused (an ACL user always has one here); `user` alone sends
/// `AUTH user password`, no user sends `AUTH password` (the `default` user).
public struct RedisEndpoint: Sendable, Equatable {
    /// One `host:port`.
    public struct Node: Sendable, Equatable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: UInt16
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// The server (single mode) or the seed nodes (cluster mode), at least one.
    public var nodes: [Node]
    public var tls: Bool
    public var cluster: Bool
    public var caFile: String?
    public var user: String?
    public var password: String?
    public var db: Int

    /// The first node's host (the only one in single mode).
    public var host: String { nodes[0].host }
    public var port: UInt16 { nodes[0].port }

    /// Parses `url`; the error text starts with `replay.redis_url:` and says what is wrong.
    public static func parse(_ url: String) throws -> RedisEndpoint {
        func bad(_ why: String) -> ReplayStoreError { ReplayStoreError("replay.redis_url: \(why)") }
        let schemes: [(String, tls: Bool, cluster: Bool)] = [
            ("redis://", false, false), ("rediss://", true, false),
            ("redis+cluster://", false, true), ("rediss+cluster://", true, true),
        ]
        let lower = url.lowercased()
        guard let scheme = schemes.first(where: { lower.hasPrefix($0.0) }) else {
            // Only the scheme is echoed: the rest may hold a password.
            let given = url.range(of: "://").map { String(url[..<$0.lowerBound].prefix(20)) } ?? "none"
            throw bad("unknown scheme \"\(given)\": expected redis://, rediss://, redis+cluster:// or rediss+cluster://")
        }
        var rest = Substring(url.dropFirst(scheme.0.count))
        guard !rest.contains("#") else { throw bad("a fragment (#) is not supported") }
        var caFile: String?
        if let q = rest.firstIndex(of: "?") {
            let query = rest[rest.index(after: q)...]
            rest = rest[..<q]
            for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, parts[0] == "ca_file" else {
                    throw bad("unknown query parameter \"\(parts[0])\" (only ca_file is supported)")
                }
                guard scheme.tls else { throw bad("ca_file needs a TLS scheme (rediss:// or rediss+cluster://)") }
                guard let path = String(parts[1]).removingPercentEncoding, !path.isEmpty else {
                    throw bad("ca_file is empty or badly percent-encoded")
                }
                caFile = path
            }
        }
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
        if scheme.cluster && db != 0 { throw bad("a cluster has only database 0") }
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
        let hostList = rest.split(separator: ",", omittingEmptySubsequences: false)
        if !scheme.cluster && hostList.count > 1 { throw bad("several hosts need redis+cluster://") }
        var nodes: [Node] = []
        for item in hostList { nodes.append(try parseNode(item, bad)) }
        return RedisEndpoint(nodes: nodes, tls: scheme.tls, cluster: scheme.cluster, caFile: caFile, user: user,
                             password: password, db: db)
    }

    private static func parseNode(_ text: Substring, _ bad: (String) -> ReplayStoreError) throws -> Node {
        var host: String
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw bad("unterminated [ in host") }
            host = String(text[text.index(after: text.startIndex)..<close])
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("junk after ]") }
                portText = after.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
        } else {
            host = String(text)
        }
        guard !host.isEmpty else { throw bad("missing host") }
        guard host.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "/" }) else { throw bad("bad host \"\(host)\"") }
        var port: UInt16 = 6379
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let p = UInt16(portText), p > 0 else {
                throw bad("bad port \"\(portText)\" (1–65535)")
            }
            port = p
        }
        return Node(host: host, port: port)
    }
}
