import Foundation

/// A URL as `BlockingHTTPClient` needs it: `http://host[:port]/path?query`, `https://…` or `file:///path`.
///
/// Deliberately small: no user info (credentials in a key-set URL would end up in logs), no fragment sent,
/// IPv6 literals in brackets (RFC 3986 §3.2.2).
struct FetchURL: Sendable, Equatable {
    /// `http`, `https` or `file` (lowercased).
    var scheme: String
    /// Host name or IP literal without brackets; empty for `file`.
    var host: String
    /// Port (default 80 / 443); 0 for `file`.
    var port: UInt16
    /// Request target (`/path?query`) for HTTP; the file system path for `file`.
    var target: String

    /// The `Host` header value (RFC 9110 §7.2): the port only when it is not the scheme's default.
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        let defaultPort: UInt16 = scheme == "https" ? 443 : 80
        return port == defaultPort ? name : "\(name):\(port)"
    }

    init(scheme: String, host: String, port: UInt16, target: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.target = target
    }

    /// Parses `text`; throws `FetchError.invalidURL` or `.unsupportedScheme`.
    init(_ text: String) throws {
        guard let sep = text.range(of: "://") else { throw FetchError.invalidURL("no scheme in \(text)") }
        let scheme = text[..<sep.lowerBound].lowercased()
        let rest = String(text[sep.upperBound...])
        switch scheme {
        case "file":
            // file:///abs/path or file://localhost/abs/path (RFC 8089 §2).
            var path = rest
            if path.hasPrefix("localhost/") { path.removeFirst("localhost".count) }
            guard path.hasPrefix("/") else { throw FetchError.invalidURL("file URL needs an absolute path: \(text)") }
            self.init(scheme: "file", host: "", port: 0, target: path.removingPercentEncoding ?? path)
            return
        case "http", "https":
            break
        default:
            throw FetchError.unsupportedScheme(scheme)
        }
        let withoutFragment = rest.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? rest
        let slash = withoutFragment.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? withoutFragment.endIndex
        let authority = String(withoutFragment[..<slash])
        var target = String(withoutFragment[slash...])
        if target.isEmpty { target = "/" } else if target.hasPrefix("?") { target = "/" + target }
        guard !authority.contains("@") else { throw FetchError.invalidURL("user info is not allowed in \(scheme) URLs") }
        var host: String
        var portText: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw FetchError.invalidURL("unclosed [ in \(text)") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw FetchError.invalidURL("junk after ] in \(text)") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = String(authority[..<colon])
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        guard !host.isEmpty else { throw FetchError.invalidURL("no host in \(text)") }
        var port: UInt16 = scheme == "https" ? 443 : 80
        if let portText {
            guard let p = UInt16(portText), p > 0 else { throw FetchError.invalidURL("bad port in \(text)") }
            port = p
        }
        guard target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw FetchError.invalidURL("path must be printable ASCII without spaces: \(text)")
        }
        host = host.lowercased()
        self.init(scheme: scheme, host: host, port: port, target: target)
    }
}
