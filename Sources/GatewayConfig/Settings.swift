import AppCheck
import Foundation
import JSONLog
import KeySets
import ReplayStores

/// The validated, ready-to-use configuration. Produced only by `ConfigLoader` from what the user wrote
/// (docs/configuration.md); every value here has passed its checks, so the server never re-validates.
public struct Settings: Sendable {
    public var server: ServerSettings
    public var appCheck: AppCheckSettings
    public var replay: ReplaySettings
    /// Upstreams by name, in file order.
    public var upstreams: [UpstreamSettings]
    /// Routes in file order; the first match wins.
    public var routes: [RouteSettings]
    /// The enforcement dashboard (docs/dashboard.md).
    public var dashboard = DashboardSettings()
    /// The file this came from (for reload and messages).
    public var sourcePath: String
    /// The self-hosted App Check provider, when `issuer:` is written.
    public var issuer: IssuerSettings? = nil
    /// `FILE:LINE:COLUMN: warning: …` for settings that load but do not do what they seem to (a risk limit nothing
    /// can enforce, a provider no key set mints), in file order; `check-config` prints them and `serve` logs them.
    public var warnings: [String] = []

    /// The App Check rules of docs/behaviour.md from `app_check` and `replay.limited_use_max_ttl`.
    public var appCheckPolicy: AppCheckPolicy {
        AppCheckPolicy(projectNumber: appCheck.projectNumber, projectId: appCheck.projectId, appIds: Set(appCheck.appIds),
                       clockSkew: appCheck.clockSkew, limitedUseMaxTTL: replay.limitedUseMaxTTL)
    }

    /// The rules for tokens of the gateway's own issuer (docs/issuer.md): `iss` its own, limited-use lifetimes up to
    /// its `limited_use_ttl`; nil without `issuer:`.
    public var ownIssuerPolicy: AppCheckPolicy? {
        issuer.map { issuer in
            appCheckPolicy.withIssuer(issuer.tokenIssuer(projectNumber: appCheck.projectNumber),
                                      limitedUseMaxTTL: max(appCheckPolicy.limitedUseMaxTTL, issuer.limitedUseTTL))
        }
    }

    public init(server: ServerSettings, appCheck: AppCheckSettings, replay: ReplaySettings,
                upstreams: [UpstreamSettings], routes: [RouteSettings], sourcePath: String) {
        self.server = server
        self.appCheck = appCheck
        self.replay = replay
        self.upstreams = upstreams
        self.routes = routes
        self.sourcePath = sourcePath
    }
}

/// One `app_check.trusted_issuers` entry: tokens whose key comes from this set must carry this `iss`.
public struct TrustedIssuerSettings: Sendable {
    public var iss: String
    /// `https://`, `http://` or `file://`; fetched and cached with `app_check.jwks`'s timings.
    public var jwksURL: String
    public init(iss: String, jwksURL: String) {
        self.iss = iss
        self.jwksURL = jwksURL
    }
}

/// A `host:port` to listen on or connect to. `host` is an IPv4 or IPv6 literal (no brackets) or a name.
public struct HostPort: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: UInt16
    public init(host: String, port: UInt16) { self.host = host; self.port = port }
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// An IPv4 or IPv6 network, for `trusted_proxies`.
public struct CIDR: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes for IPv4, 16 for IPv6.
    public var address: [UInt8]
    public var prefixLength: Int
    public init(address: [UInt8], prefixLength: Int) { self.address = address; self.prefixLength = prefixLength }
    public var description: String { "\(address.count == 4 ? address.map(String.init).joined(separator: ".") : "ipv6")/\(prefixLength)" }
    /// True when `ip` (4 or 16 bytes) lies in this network.
    public func contains(_ ip: [UInt8]) -> Bool {
        guard ip.count == address.count else { return false }
        var bits = prefixLength
        var i = 0
        while bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if ip[i] & mask != address[i] & mask { return false }
            bits -= 8
            i += 1
        }
        return true
    }
}

public struct TLSSettings: Sendable {
    public var listen: [HostPort]
    public var certificatePath: String
    public var privateKeyPath: String
    /// "1.2" or "1.3".
    public var minVersion: String
    public init(listen: [HostPort], certificatePath: String, privateKeyPath: String, minVersion: String) {
        self.listen = listen; self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath; self.minVersion = minVersion
    }
}

public struct LimitSettings: Sendable {
    public var maxConnections: Int = 10_000
    /// Open client connections per address (IPv4 /32, IPv6 /64); one more is closed at accept. 0 = no bound.
    /// Connections from `trusted_proxies` are exempt.
    public var maxConnectionsPerAddress: Int = 1_000
    /// Requests from one client address (IPv4 /32, IPv6 /64) in progress at one upstream, per thread; one more is
    /// answered 503 `upstream_busy` (reason `address_busy`) without reaching the upstream. 0 = no bound. While it
    /// is on, an address with another request in progress at the upstream may not take the last half of the
    /// upstream's `max_connects_per_second` budget.
    /// Peers in `trusted_proxies` are exempt. Default 256.
    public var maxUpstreamRequestsPerAddress: Int = 256
    public var maxHeaderBytes: Int = 16 * 1024
    public var maxHeaders: Int = 100
    public var maxBodyBytes: Int64 = 10 * 1024 * 1024
    /// Seconds.
    public var headerTimeout: Double = 10
    /// The longest gap between two reads of a request body (1 s to 1 h); then 408, or a cut if the response started.
    public var bodyTimeout: Double = 60
    public var idleTimeout: Double = 60
    public var shutdownGrace: Double = 10
    public init() {}
}

public struct ServerSettings: Sendable {
    public var listen: [HostPort] = [HostPort(host: "0.0.0.0", port: 8080)]
    public var tls: TLSSettings? = nil
    public var adminListen: HostPort? = HostPort(host: "127.0.0.1", port: 9901)
    /// Resolved: `auto` becomes the number of cores.
    public var threads: Int = 1
    public var limits = LimitSettings()
    public var trustedProxies: [CIDR] = []
    public var logLevel: LogLevel = .info
    public init() {}
}

public struct OutdatedClientSettings: Sendable {
    public var header: String
    /// Already compiled and checked by the loader.
    public var pattern: String
    public init(header: String, pattern: String) { self.header = header; self.pattern = pattern }
}

public struct AppCheckSettings: Sendable {
    public var projectNumber: String = ""
    public var projectId: String? = nil
    public var appIds: [String] = []
    public var jwks = JWKSSettings()
    public var clockSkew: Double = 10
    public var tokenCacheSize: Int = 100_000
    public var outdatedClient: OutdatedClientSettings? = nil
    /// Further key sets for tokens minted by other deployments' issuers (docs/behaviour.md), each with its own `iss`.
    public var trustedIssuers: [TrustedIssuerSettings] = []
    public init() {}
}

public struct UpstreamSettings: Sendable {
    public var name: String
    /// "http" or "https".
    public var scheme: String
    public var host: String
    public var port: UInt16
    /// Path prefix from the URL ("" when the URL has none or just "/"); prepended to forwarded paths.
    public var basePath: String
    public var connectTimeout: Double = 2
    public var responseTimeout: Double = 30
    public var maxIdleConnections: Int = 64
    /// `protocol`: http1 (default) or h2 (§6.1).
    public var httpProtocol: UpstreamProtocol = .http1
    /// New connections per second per thread (and burst); past it a request that finds no idle connection is
    /// answered 503 `connect_rate_limited`. 0 = unbounded.
    public var maxConnectsPerSecond: Int = 5000
    /// For https upstreams: a PEM bundle instead of the system store.
    public var caFile: String? = nil
    /// `host[:port]` as a Host header names it (the port only when not the scheme's default).
    public var authority: String {
        let h = host.contains(":") ? "[\(host)]" : host
        let defaultPort: UInt16 = scheme == "https" ? 443 : 80
        return port == defaultPort ? h : "\(h):\(port)"
    }

    public init(name: String, scheme: String, host: String, port: UInt16, basePath: String) {
        self.name = name; self.scheme = scheme; self.host = host; self.port = port; self.basePath = basePath
    }
}

public enum Enforcement: String, Sendable { case enforce, monitor, off }
/// How the gateway speaks to an upstream (§6.1): HTTP/1.1, or HTTP/2 (h2c with prior knowledge on `http://`,
/// TLS with ALPN `h2` on `https://`).
public enum UpstreamProtocol: String, Sendable { case http1, h2 }
public enum CORSPreflight: String, Sendable { case bypass, verify }

public enum RouteMatch: Sendable, Equatable {
    case exact(String)
    case prefix(String)
}

public struct RouteSettings: Sendable {
    public var name: String
    public var match: RouteMatch
    /// Upper-case method names; empty = any method.
    public var methods: [String] = []
    /// Index into `Settings.upstreams`.
    public var upstreamIndex: Int
    public var enforcement: Enforcement = .enforce
    public var replayProtection: Bool = false
    /// Resolved: the route's own value or `server.limits.max_body_bytes`.
    public var maxBodyBytes: Int64
    public var forwardToken: Bool = false
    public var corsPreflight: CORSPreflight = .bypass
    /// `provider` claims admitted (`unspecified` for tokens without one); empty = any (docs/behaviour.md step 7).
    public var providers: Set<String> = []
    /// `max_risk`: the highest `risk` claim admitted (App Attest's risk metric); nil = not checked.
    public var maxRisk: Int? = nil
    /// `require_risk`: with `maxRisk`, a token without a `risk` claim is refused too (`risk_unknown`).
    public var requireRisk: Bool = false
    /// `websocket: true`: WebSocket upgrades on this route are tunnelled (SPEC §6.1); false (the default) removes
    /// `Upgrade` as any hop-by-hop header.
    public var websocket: Bool = false
    /// `stream_idle_timeout` in seconds (1 ms to 1 day); nil when the route does not set it. Once a response head has
    /// arrived, it replaces the response-body and request-body gap bounds with one idle bound over both directions;
    /// a WebSocket tunnel uses it, or `RouteSettings.defaultTunnelIdleTimeout` when nil.
    public var streamIdleTimeout: Double? = nil
    /// A tunnel's idle bound when the route sets no `stream_idle_timeout`: 5 minutes (SPEC §6.1).
    public static let defaultTunnelIdleTimeout: Double = 300
    /// `dpop`: what the route asks of key-bound tokens (SPEC §4.4); default `optional`.
    public var dpop: DPoPMode = .optional
    /// `dpop_max_age`: how old a proof's `iat` may be, seconds; default 60.
    public var dpopMaxAge: Double = 60
    public init(name: String, match: RouteMatch, upstreamIndex: Int, maxBodyBytes: Int64) {
        self.name = name; self.match = match; self.upstreamIndex = upstreamIndex; self.maxBodyBytes = maxBodyBytes
    }
}
