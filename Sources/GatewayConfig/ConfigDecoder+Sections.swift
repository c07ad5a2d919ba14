import Foundation
import JSONLog
import KeySets
import ReplayStores

/// The sections of docs/configuration.md, each read with its defaults and limits (listed in `ConfigLoader` and README).
extension ConfigDecoder {
    static let rootKeys = ["server", "app_check", "replay", "issuer", "dashboard", "upstreams", "routes"]

    /// Settings when the tree could be walked at all; callers look at `errors` to know whether they are valid.
    func decodeSettings(_ root: Node, sourcePath: String) -> Settings? {
        guard let top = fields(root, "the top level", known: Self.rootKeys) else { return nil }
        let server = decodeServer(top.value("server"))
        var appCheck = AppCheckSettings()
        if let node = top.value("app_check") {
            appCheck = decodeAppCheck(node)
        } else {
            error(top.position, "missing required key 'app_check' (at least app_check.project_number)")
        }
        let replay = top.value("replay").map(decodeReplay) ?? ReplaySettings()
        if let node = top.value("app_check"), appCheck.jwks.isNone, top.value("issuer") == nil,
           appCheck.trustedIssuers.isEmpty {
            error(jwksURLPosition ?? ConfigPosition(node),
                  "app_check.jwks.url is none but there is no issuer: section and no app_check.trusted_issuers: no key set could ever verify a token")
        }
        let issuer = top.value("issuer").map { decodeIssuer($0, projectNumber: appCheck.projectNumber) }
        if let issuer, !issuer.issuerURL.isEmpty,
           appCheck.trustedIssuers.contains(where: { $0.iss == issuer.tokenIssuer(projectNumber: appCheck.projectNumber) }),
           let node = top.value("issuer") {
            error(node, "issuer.issuer_url makes this gateway's own issuer, which app_check.trusted_issuers must not list again")
        }
        let (upstreams, declared) = decodeUpstreams(top.value("upstreams"))
        var routes: [RouteSettings] = []
        if let node = top.value("routes") {
            routes = decodeRoutes(node, upstreams: upstreams, declaredUpstreams: declared,
                                  defaultMaxBody: server.limits.maxBodyBytes)
        } else {
            error(top.keyPosition("routes") ?? top.position, "missing required key 'routes': at least one route is required")
        }
        var settings = Settings(server: server, appCheck: appCheck, replay: replay, upstreams: upstreams,
                                routes: routes, sourcePath: sourcePath)
        settings.issuer = issuer
        warnUnmintableProviders(appCheck: appCheck, issuer: issuer)
        if let node = top.value("dashboard") { settings.dashboard = decodeDashboard(node) }
        return settings
    }

    // MARK: server

    func decodeServer(_ node: Node?) -> ServerSettings {
        var server = ServerSettings()
        server.threads = cores
        guard let node, let f = fields(node, "server", known: [
            "listen", "tls", "admin_listen", "threads", "limits", "trusted_proxies", "log_level",
        ]) else { return server }

        var publicAddresses: [(HostPort, ConfigPosition)] = []
        if let value = f.value("listen") {
            let addresses = listenList(value, "server.listen")
            server.listen = addresses.map(\.0)
            publicAddresses += addresses
        } else {
            publicAddresses += server.listen.map { ($0, f.position) }
        }
        if let value = f.value("tls"), let (tls, addresses) = decodeTLS(value) {
            server.tls = tls
            publicAddresses += addresses
        }
        if case let .sequence(written)? = f.value("listen"), written.isEmpty, server.tls == nil {
            error(f.keyPosition("listen") ?? f.position, "no public listener: server.listen is empty and there is no server.tls")
        }
        reportDuplicateListeners(publicAddresses)

        if let value = f.value("admin_listen"), let text = string(value, "server.admin_listen") {
            if text == "off" {
                server.adminListen = nil
            } else if let admin = parseHostPort(text, value, "server.admin_listen"),
                      bindable(admin, value, "server.admin_listen") {
                server.adminListen = admin
                if let clash = publicAddresses.first(where: { Self.overlaps($0.0, admin) }) {
                    error(value, "admin_listen \(admin) must not be a public listen address (\(clash.0) at \(clash.1)): /metrics is not for the internet")
                }
            }
        } else if f.value("admin_listen") == nil, let admin = server.adminListen,
                  let clash = publicAddresses.first(where: { Self.overlaps($0.0, admin) }) {
            error(clash.1, "listen address \(clash.0) clashes with the default admin_listen \(admin); set server.admin_listen elsewhere")
        }

        if let value = f.value("threads"), let text = string(value, "server.threads") {
            if text == "auto" {
                server.threads = cores
            } else if let threads = Int(text), (1...1024).contains(threads) {
                server.threads = threads
            } else {
                error(value, "invalid value '\(text)' for server.threads: expected auto or a number from 1 to 1024")
            }
        }
        if let value = f.value("limits") { server.limits = decodeLimits(value) }
        if let value = f.value("trusted_proxies"), let items = list(value, "server.trusted_proxies") {
            server.trustedProxies = items.compactMap { item in
                guard let text = string(item, "server.trusted_proxies") else { return nil }
                switch ConfigValueParser.cidr(text) {
                case let .success(cidr): return cidr
                case let .failure(failure):
                    error(item, "invalid CIDR '\(text)' in server.trusted_proxies: \(failure.message)")
                    return nil
                }
            }
        }
        if let value = f.value("log_level"), let level = choice(value, "server.log_level", LogLevel.allCases) {
            server.logLevel = level
        }
        return server
    }

    /// Two listen addresses that cannot both be bound: same non-zero port and same host, or a wildcard host.
    static func overlaps(_ a: HostPort, _ b: HostPort) -> Bool {
        guard a.port == b.port, a.port != 0 else { return false }
        return a.host == b.host || ConfigValueParser.isWildcard(a.host) || ConfigValueParser.isWildcard(b.host)
    }

    private func reportDuplicateListeners(_ addresses: [(HostPort, ConfigPosition)]) {
        for (index, (address, position)) in addresses.enumerated() {
            if let earlier = addresses[..<index].first(where: { Self.overlaps($0.0, address) }) {
                error(position, "listen address \(address) overlaps \(earlier.0) at \(earlier.1)")
            }
        }
    }

    private func listenList(_ node: Node, _ what: String) -> [(HostPort, ConfigPosition)] {
        guard let items = list(node, what) else { return [] }
        return items.compactMap { item in
            guard let address = hostPort(item, what), bindable(address, item, what) else { return nil }
            return (address, ConfigPosition(item))
        }
    }

    /// False (with an error at `node`) for an address `serve` cannot bind by construction: listeners are
    /// IPv6-only sockets for IPv6 addresses (`IPV6_V6ONLY`), so an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
    /// fails with EINVAL at bind (issue 39). It names the IPv4 address to write instead.
    func bindable(_ address: HostPort, _ node: Node, _ what: String) -> Bool {
        guard let bytes = ConfigValueParser.ipv6Bytes(address.host), bytes[0..<10].allSatisfy({ $0 == 0 }),
              bytes[10] == 0xFF, bytes[11] == 0xFF else { return true }
        let v4 = bytes[12...].map(String.init).joined(separator: ".")
        error(node, "invalid address '\(address)' for \(what): an IPv4-mapped IPv6 address "
            + "cannot be listened on (IPv6 listeners are IPv6-only); write \(v4):\(address.port)")
        return false
    }

    private func decodeTLS(_ node: Node) -> (TLSSettings, [(HostPort, ConfigPosition)])? {
        guard let f = fields(node, "server.tls", known: ["listen", "certificate", "private_key", "min_version"]) else {
            return nil
        }
        var addresses = [(HostPort(host: "0.0.0.0", port: 8443), f.position)]
        if let value = f.value("listen") {
            addresses = listenList(value, "server.tls.listen")
            if addresses.isEmpty, case .sequence = value { error(value, "server.tls.listen must not be empty") }
        }
        var certificate = "", privateKey = ""
        if let value = f.value("certificate") {
            certificate = readableFile(value, "server.tls.certificate") ?? ""
        } else {
            error(f.position, "missing required key 'certificate' in server.tls")
        }
        if let value = f.value("private_key") {
            privateKey = readableFile(value, "server.tls.private_key") ?? ""
        } else {
            error(f.position, "missing required key 'private_key' in server.tls")
        }
        var minVersion = "1.2"
        if let value = f.value("min_version"), let text = string(value, "server.tls.min_version") {
            if text == "1.2" || text == "1.3" {
                minVersion = text
            } else if let number = Double(text), number < 1.2 {
                error(value, "TLS below 1.2 is refused (App Transport Security); min_version must be \"1.2\" or \"1.3\"")
            } else {
                error(value, "invalid value '\(text)' for server.tls.min_version: expected \"1.2\" or \"1.3\"")
            }
        }
        // docs/behaviour.md, TLS: a certificate App Transport Security would refuse is a configuration error, reported at
        // the `certificate:` value (RSA < 2048, EC < 256, SHA-1, expired, key not matching).
        if !certificate.isEmpty && !privateKey.isEmpty, let value = f.value("certificate") {
            for problem in CertificateAudit.problems(certificatePath: certificate, privateKeyPath: privateKey) {
                error(value, "\(problem.file): \(problem.message)")
            }
        }
        let tls = TLSSettings(listen: addresses.map(\.0), certificatePath: certificate,
                              privateKeyPath: privateKey, minVersion: minVersion)
        return (tls, addresses)
    }

    private func decodeLimits(_ node: Node) -> LimitSettings {
        var limits = LimitSettings()
        guard let f = fields(node, "server.limits", known: [
            "max_connections", "max_connections_per_address", "max_header_bytes", "max_headers", "max_body_bytes",
            "header_timeout", "body_timeout", "idle_timeout", "shutdown_grace", "max_upstream_requests_per_address",
        ]) else { return limits }
        if let v = f.value("max_upstream_requests_per_address"),
           let n = int(v, "server.limits.max_upstream_requests_per_address", in: 0...1_000_000) {
            limits.maxUpstreamRequestsPerAddress = n
        }
        if let v = f.value("max_connections"), let n = int(v, "server.limits.max_connections", in: 1...10_000_000) {
            limits.maxConnections = n
        }
        if let v = f.value("max_connections_per_address"),
           let n = int(v, "server.limits.max_connections_per_address", in: 0...10_000_000) {
            limits.maxConnectionsPerAddress = n
        }
        if let v = f.value("max_header_bytes"), let n = size(v, "server.limits.max_header_bytes", in: 1024...(1 << 20)) {
            limits.maxHeaderBytes = Int(n)
        }
        if let v = f.value("max_headers"), let n = int(v, "server.limits.max_headers", in: 1...10_000) {
            limits.maxHeaders = n
        }
        if let v = f.value("max_body_bytes"), let n = size(v, "server.limits.max_body_bytes", in: 0...Int64.max) {
            limits.maxBodyBytes = n
        }
        if let v = f.value("header_timeout"), let d = duration(v, "server.limits.header_timeout", in: 0.001...86400) {
            limits.headerTimeout = d
        }
        if let v = f.value("body_timeout"), let d = duration(v, "server.limits.body_timeout", in: 1...3600) {
            limits.bodyTimeout = d
        }
        if let v = f.value("idle_timeout"), let d = duration(v, "server.limits.idle_timeout", in: 0.001...86400) {
            limits.idleTimeout = d
        }
        if let v = f.value("shutdown_grace"), let d = duration(v, "server.limits.shutdown_grace", in: 0...3600) {
            limits.shutdownGrace = d
        }
        return limits
    }

    // MARK: app_check

    func decodeAppCheck(_ node: Node) -> AppCheckSettings {
        var appCheck = AppCheckSettings()
        guard let f = fields(node, "app_check", known: [
            "project_number", "project_id", "app_ids", "jwks", "clock_skew", "token_cache_size", "outdated_client",
            "trusted_issuers",
        ]) else { return appCheck }
        if let value = f.value("project_number") {
            if let text = string(value, "app_check.project_number") {
                if !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) {
                    appCheck.projectNumber = text
                } else {
                    error(value, "app_check.project_number must be all digits (the project number, not the project ID), got '\(text)'")
                }
            }
        } else {
            error(f.keyPosition("project_number") ?? f.position, "missing required key 'project_number' in app_check")
        }
        if let value = f.value("project_id"), let text = string(value, "app_check.project_id"), !text.isEmpty {
            if text.contains(where: { $0.isWhitespace || $0 == "/" }) {
                error(value, "invalid app_check.project_id '\(text)': no spaces or '/' (it is the ID, e.g. my-project)")
            } else {
                appCheck.projectId = text
            }
        }
        if let value = f.value("app_ids"), let items = list(value, "app_check.app_ids") {
            appCheck.appIds = items.compactMap { nonEmptyString($0, "an entry of app_check.app_ids") }
        }
        if let value = f.value("jwks") { appCheck.jwks = decodeJWKS(value) }
        if let value = f.value("trusted_issuers") { appCheck.trustedIssuers = decodeTrustedIssuers(value) }
        if let v = f.value("clock_skew"), let d = duration(v, "app_check.clock_skew", in: 0...300) {
            appCheck.clockSkew = d
        }
        if let v = f.value("token_cache_size"), let n = int(v, "app_check.token_cache_size", in: 0...Int.max) {
            appCheck.tokenCacheSize = n
        }
        if let value = f.value("outdated_client"),
           let oc = fields(value, "app_check.outdated_client", known: ["header", "pattern"]) {
            var header: String?, pattern: String?
            if let v = oc.value("header"), let text = nonEmptyString(v, "app_check.outdated_client.header") {
                if Self.isToken(text) { header = text } else {
                    error(v, "invalid header name '\(text)' for app_check.outdated_client.header")
                }
            } else if oc.value("header") == nil {
                error(oc.position, "missing required key 'header' in app_check.outdated_client")
            }
            if let v = oc.value("pattern"), let text = string(v, "app_check.outdated_client.pattern") {
                do {
                    _ = try NSRegularExpression(pattern: text)
                    pattern = text
                } catch {
                    self.error(v, "invalid regular expression '\(text)' for app_check.outdated_client.pattern: \(error.localizedDescription)")
                }
            } else if oc.value("pattern") == nil {
                error(oc.position, "missing required key 'pattern' in app_check.outdated_client")
            }
            if let header, let pattern { appCheck.outdatedClient = OutdatedClientSettings(header: header, pattern: pattern) }
        }
        return appCheck
    }

    private func decodeJWKS(_ node: Node) -> JWKSSettings {
        var jwks = JWKSSettings()
        guard let f = fields(node, "app_check.jwks", known: [
            "url", "max_age", "unknown_kid_refresh_interval", "max_stale", "cache_file",
        ]) else { return jwks }
        if let v = f.value("url"), let text = nonEmptyString(v, "app_check.jwks.url") {
            let lower = text.lowercased()
            if lower == JWKSSettings.none {
                jwks.url = JWKSSettings.none
                jwksURLPosition = ConfigPosition(v)
            } else if lower.hasPrefix("file://") {
                if text.dropFirst(7).isEmpty { error(v, "app_check.jwks.url 'file://' needs a path, e.g. file:///etc/jwks.json") } else { jwks.url = text }
            } else if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
                if let host = URLComponents(string: text)?.host, !host.isEmpty { jwks.url = text } else {
                    error(v, "invalid app_check.jwks.url '\(text)': expected a URL with a host")
                }
            } else {
                error(v, "app_check.jwks.url must start with https://, http:// or file://, got '\(text)'")
            }
        }
        if let v = f.value("max_age"), let d = duration(v, "app_check.jwks.max_age", in: 1...(7 * 86400)) { jwks.maxAge = d }
        if let v = f.value("unknown_kid_refresh_interval"),
           let d = duration(v, "app_check.jwks.unknown_kid_refresh_interval", in: 0.001...86400) {
            jwks.unknownKidRefreshInterval = d
        }
        if let v = f.value("max_stale"), let d = duration(v, "app_check.jwks.max_stale", in: 0...(30 * 86400)) { jwks.maxStale = d }
        if let v = f.value("cache_file"), let text = string(v, "app_check.jwks.cache_file") {
            if jwks.isNone && !text.isEmpty {
                error(v, "app_check.jwks.cache_file has nothing to cache: app_check.jwks.url is none")
            } else {
                jwks.cacheFile = text
            }
        }
        return jwks
    }

    /// RFC 9110 §5.6.2 `token`: header names and methods.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { c in
            c.isASCII && (CharacterSet.alphanumerics.contains(c) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(c))
        }
    }

    // MARK: replay

    func decodeReplay(_ node: Node) -> ReplaySettings {
        var replay = ReplaySettings()
        guard let f = fields(node, "replay", known: [
            "store", "sqlite_path", "redis_url", "key_prefix", "timeout", "limited_use_max_ttl",
        ]) else { return replay }
        if let v = f.value("store"), let store = choice(v, "replay.store", [ReplayStoreKind.memory, .sqlite, .redis]) { replay.store = store }
        if let v = f.value("sqlite_path"), let text = nonEmptyString(v, "replay.sqlite_path") { replay.sqlitePath = text }
        if let v = f.value("redis_url"), let text = nonEmptyString(v, "replay.redis_url") {
            // Checked in full here (scheme, hosts, ports, credentials, ca_file) so a bad URL is a FILE:LINE:COLUMN
            // error at load rather than a start-up failure. The text never echoes the password.
            do {
                let endpoint = try RedisEndpoint.parse(text)
                if let caFile = endpoint.caFile, !FileManager.default.isReadableFile(atPath: caFile) {
                    error(v, "replay.redis_url: ca_file \(caFile) is not readable")
                } else {
                    replay.redisURL = text
                }
            } catch let e as ReplayStoreError {
                error(v, e.description)
            } catch {
                self.error(v, "replay.redis_url: \(error)")
            }
        }
        if let v = f.value("key_prefix"), let text = string(v, "replay.key_prefix") { replay.keyPrefix = text }
        if let v = f.value("timeout"), let d = duration(v, "replay.timeout", in: 0.001...60) { replay.timeout = d }
        if let v = f.value("limited_use_max_ttl"), let d = duration(v, "replay.limited_use_max_ttl", in: 1...(7 * 86400)) {
            replay.limitedUseMaxTTL = d
        }
        return replay
    }

    // MARK: upstreams

    /// Valid upstreams in file order, and the names of all declared ones (valid or not), so that a route naming
    /// an upstream that failed its own checks is not reported a second time.
    func decodeUpstreams(_ node: Node?) -> ([UpstreamSettings], Set<String>) {
        guard let node else { return ([], []) }
        guard case let .mapping(mapping) = node else {
            error(node, "expected a mapping of name → upstream for upstreams, got \(node.kindName)")
            return ([], [])
        }
        var upstreams: [UpstreamSettings] = []
        var declared: Set<String> = []
        for (key, value) in mapping {
            guard case let .scalar(scalar) = key, !scalar.string.isEmpty else {
                error(key, "upstream names must be non-empty strings")
                continue
            }
            let name = scalar.string
            declared.insert(name)
            if let upstream = decodeUpstream(name, value) { upstreams.append(upstream) }
        }
        return (upstreams, declared)
    }

    private func decodeUpstream(_ name: String, _ node: Node) -> UpstreamSettings? {
        let context = "upstreams.\(name)"
        guard let f = fields(node, context, known: [
            "url", "connect_timeout", "response_timeout", "max_idle_connections", "max_connects_per_second", "ca_file",
            "protocol",
        ]) else { return nil }
        var upstream: UpstreamSettings?
        if let v = f.value("url") {
            if let text = string(v, "\(context).url") {
                switch Self.upstreamURL(text, name: name) {
                case let .success(value): upstream = value
                case let .failure(failure): error(v, "invalid \(context).url '\(text)': \(failure.message)")
                }
            }
        } else {
            error(f.position, "missing required key 'url' in \(context)")
        }
        var probe = UpstreamSettings(name: name, scheme: "http", host: "", port: 0, basePath: "")
        if let v = f.value("connect_timeout"), let d = duration(v, "\(context).connect_timeout", in: 0.001...300) {
            probe.connectTimeout = d
        }
        if let v = f.value("response_timeout"), let d = duration(v, "\(context).response_timeout", in: 0.001...86400) {
            probe.responseTimeout = d
        }
        if let v = f.value("max_idle_connections"), let n = int(v, "\(context).max_idle_connections", in: 0...100_000) {
            probe.maxIdleConnections = n
        }
        if let v = f.value("max_connects_per_second"),
           let n = int(v, "\(context).max_connects_per_second", in: 0...1_000_000) {
            probe.maxConnectsPerSecond = n
        }
        if let v = f.value("protocol"),
           let value = choice(v, "\(context).protocol", [UpstreamProtocol.http1, .h2]) {
            probe.httpProtocol = value
        }
        if let v = f.value("ca_file") {
            if let upstream, upstream.scheme != "https" {
                error(v, "\(context).ca_file applies only to https:// upstreams")
            } else {
                probe.caFile = readableFile(v, "\(context).ca_file")
            }
        }
        guard var result = upstream else { return nil }
        result.connectTimeout = probe.connectTimeout
        result.responseTimeout = probe.responseTimeout
        result.maxIdleConnections = probe.maxIdleConnections
        result.maxConnectsPerSecond = probe.maxConnectsPerSecond
        result.caFile = probe.caFile
        result.httpProtocol = probe.httpProtocol
        return result
    }

    /// `http[s]://host[:port][/base/path]`; the port defaults to 80 / 443; a path becomes `basePath` without
    /// trailing slash. User info, query and fragment are refused.
    static func upstreamURL(_ text: String, name: String) -> Result<UpstreamSettings, ConfigValueFailure> {
        guard let schemeEnd = text.range(of: "://") else {
            return .failure(.init("expected http://host[:port][/path] or https://…"))
        }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else {
            return .failure(.init("the scheme must be http:// or https://, not \(scheme)://"))
        }
        let rest = text[schemeEnd.upperBound...]
        if rest.contains("?") || rest.contains("#") { return .failure(.init("a query or fragment is not allowed")) }
        let authority = rest.prefix { $0 != "/" }
        if authority.contains("@") { return .failure(.init("user info (user@) is not allowed")) }
        if authority.isEmpty { return .failure(.init("the host is missing")) }
        var path = String(rest[authority.endIndex...])
        if path.contains(where: { $0.isWhitespace }) { return .failure(.init("the path must not contain spaces")) }
        while path.hasSuffix("/") { path.removeLast() }
        switch ConfigValueParser.hostPort(String(authority), defaultPort: scheme == "https" ? 443 : 80) {
        case let .failure(failure): return .failure(failure)
        case let .success(hostPort):
            if hostPort.port == 0 { return .failure(.init("port 0 is not a port an upstream can listen on")) }
            return .success(UpstreamSettings(name: name, scheme: scheme, host: hostPort.host, port: hostPort.port,
                                             basePath: path))
        }
    }
}
