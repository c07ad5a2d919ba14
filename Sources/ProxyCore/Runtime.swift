import AppCheck
import EventLoop
import Foundation
import GatewayConfig
import HTTPWire

/// One configuration generation, ready to serve: immutable and shared read-only by every loop. A reload
/// builds a new one off the loops (DNS resolution is blocking) and hands it to each loop.
public final class Runtime: Sendable {
    public let settings: Settings
    public let router: Router
    /// Resolved addresses per upstream (same order as `settings.upstreams`).
    public let upstreamAddresses: [[SocketAddress]]
    /// TLS client contexts for `https://` upstreams (system CA store or `ca_file`), nil for `http://`.
    public let upstreamTLS: [TLSClientContext?]
    /// For `protocol: h2` upstreams on `https://`: a client context offering ALPN `h2` alone (SPEC §6.1); nil otherwise.
    public let upstreamH2TLS: [TLSClientContext?]
    public let parserLimits: HTTPParserLimits
    /// Upstream responses may carry larger heads than we accept from clients.
    public let upstreamParserLimits: HTTPParserLimits
    public let generation: Int
    /// The routes, compiled once for this generation (`router` hands out these instances), in file order.
    public let routes: [CompiledRoute]
    /// Hot-path copies of settings (reading `settings.server.limits.x` through a class copies the whole
    /// settings value and retains everything in it).
    public let idleTimeoutNS: UInt64
    public let headerTimeoutNS: UInt64
    public let bodyTimeoutNS: UInt64
    /// `server.limits.max_connections_per_address` (0 = no bound), read at every accept.
    public let maxConnectionsPerAddress: Int
    /// `server.limits.max_upstream_requests_per_address` (0 = no bound), read when a request goes to its upstream.
    public let maxUpstreamRequestsPerAddress: Int
    /// The App Check rules of docs/behaviour.md from `app_check` and `replay.limited_use_max_ttl`.
    public let policy: AppCheckPolicy
    /// The rules for tokens of the gateway's own issuer (docs/issuer.md): `iss` its own, limited-use lifetimes up to
    /// its `limited_use_ttl`; nil without `issuer:`.
    public let ownIssuerPolicy: AppCheckPolicy?
    /// The rules for tokens of each `app_check.trusted_issuers` entry (its `iss`), in configuration order.
    public let trustedIssuerPolicies: [AppCheckPolicy]
    public let outdatedClient: OutdatedClientMatcher?
    /// `app_check.jwks.url: none`: Firebase's key set is not used; a token no set in use vouches for is refused as
    /// `wrong_issuer` (docs/issuer.md, "App Check with no Google service at all").
    public let firebaseUnused: Bool

    public init(settings: Settings, generation: Int) throws {
        self.settings = settings
        self.generation = generation
        routes = CompiledRoute.compile(settings)
        router = Router(routes: routes)
        idleTimeoutNS = .nanoseconds(settings.server.limits.idleTimeout)
        headerTimeoutNS = .nanoseconds(settings.server.limits.headerTimeout)
        bodyTimeoutNS = .nanoseconds(settings.server.limits.bodyTimeout)
        maxConnectionsPerAddress = settings.server.limits.maxConnectionsPerAddress
        maxUpstreamRequestsPerAddress = settings.server.limits.maxUpstreamRequestsPerAddress
        policy = settings.appCheckPolicy
        firebaseUnused = settings.appCheck.jwks.isNone
        trustedIssuerPolicies = settings.appCheck.trustedIssuers.map { settings.appCheckPolicy.withIssuer($0.iss) }
        ownIssuerPolicy = settings.ownIssuerPolicy
        if let oc = settings.appCheck.outdatedClient {
            outdatedClient = OutdatedClientMatcher(headerLowercased: oc.header.lowercased(),
                                                   regex: try NSRegularExpression(pattern: oc.pattern))
        } else {
            outdatedClient = nil
        }
        var resolved: [[SocketAddress]] = []
        for u in settings.upstreams {
            resolved.append(try SocketAddress.resolve(host: u.host, port: u.port))
        }
        upstreamAddresses = resolved
        upstreamTLS = try settings.upstreams.map { u -> TLSClientContext? in
            guard u.scheme == "https" else { return nil }
            do { return try TLSClientContext(caFile: u.caFile) } catch {
                throw SocketError("upstream \(u.name): TLS: \((error as? TLSError)?.message ?? "\(error)")", errno: 0)
            }
        }
        upstreamH2TLS = try settings.upstreams.map { u -> TLSClientContext? in
            guard u.scheme == "https", u.httpProtocol == .h2 else { return nil }
            do { return try TLSClientContext(caFile: u.caFile, alpnProtocols: ["h2"]) } catch {
                throw SocketError("upstream \(u.name): TLS: \((error as? TLSError)?.message ?? "\(error)")", errno: 0)
            }
        }
        let l = settings.server.limits
        parserLimits = HTTPParserLimits(maxHeadBytes: l.maxHeaderBytes, maxHeaders: l.maxHeaders,
                                        maxRequestLineBytes: min(8192, l.maxHeaderBytes))
        upstreamParserLimits = HTTPParserLimits(maxHeadBytes: max(64 * 1024, l.maxHeaderBytes),
                                                maxHeaders: max(200, l.maxHeaders),
                                                maxRequestLineBytes: 8192)
    }

    /// True when `peer` is one of `trusted_proxies` (its `X-Forwarded-*` are kept and appended to).
    public func isTrusted(_ peer: SocketAddress) -> Bool {
        let proxies = settings.server.trustedProxies
        if proxies.isEmpty { return false }
        let ip = peer.ipBytes
        return proxies.contains { $0.contains(ip) }
    }
}

extension RequestDeadlines.Limits {
    /// `server.limits`' `header_timeout`, `body_timeout` and `idle_timeout` of a runtime.
    public init(_ runtime: Runtime) {
        self.init(header: runtime.headerTimeoutNS, body: runtime.bodyTimeoutNS, idle: runtime.idleTimeoutNS)
    }
}
