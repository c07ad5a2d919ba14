import AppCheck
import EventLoop
import Foundation
import GatewayConfig
import HTTPWire

/// One configuration generation, ready to serve: immutable and shared read-only by every loop. A reload
/// builds a new one off the loops (DNS resolution is blocking) and hands it to each loop.
final class Runtime: Sendable {
    let settings: Settings
    let router: Router
    /// Resolved addresses per upstream (same order as `settings.upstreams`).
    let upstreamAddresses: [[SocketAddress]]
    /// TLS client contexts for `https://` upstreams (system CA store or `ca_file`), nil for `http://`.
    let upstreamTLS: [TLSClientContext?]
    /// For `protocol: h2` upstreams on `https://`: a client context offering ALPN `h2` alone (SPEC §6.1); nil otherwise.
    let upstreamH2TLS: [TLSClientContext?]
    let parserLimits: HTTPParserLimits
    /// Upstream responses may carry larger heads than we accept from clients.
    let upstreamParserLimits: HTTPParserLimits
    let generation: Int
    /// Hot-path copies of settings (reading `settings.server.limits.x` through a class copies the whole
    /// settings value and retains everything in it).
    let routes: [RouteSettings]
    let idleTimeoutNS: UInt64
    let headerTimeoutNS: UInt64
    let bodyTimeoutNS: UInt64
    /// `server.limits.max_connections_per_address` (0 = no bound), read at every accept.
    let maxConnectionsPerAddress: Int
    /// `server.limits.max_upstream_requests_per_address` (0 = no bound), read when a request goes to its upstream.
    let maxUpstreamRequestsPerAddress: Int
    /// The App Check rules of docs/behaviour.md from `app_check` and `replay.limited_use_max_ttl`.
    let policy: AppCheckPolicy
    /// The rules for tokens of the gateway's own issuer (docs/issuer.md): `iss` its own, limited-use lifetimes up to
    /// its `limited_use_ttl`; nil without `issuer:`.
    let ownIssuerPolicy: AppCheckPolicy?
    /// The rules for tokens of each `app_check.trusted_issuers` entry (its `iss`), in configuration order.
    let trustedIssuerPolicies: [AppCheckPolicy]
    let outdatedClient: OutdatedClientMatcher?
    /// `app_check.jwks.url: none`: Firebase's key set is not used; a token no set in use vouches for is refused as
    /// `wrong_issuer` (docs/issuer.md, "App Check with no Google service at all").
    let firebaseUnused: Bool

    init(settings: Settings, generation: Int) throws {
        self.settings = settings
        self.generation = generation
        router = Router(routes: settings.routes)
        routes = settings.routes
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
    func isTrusted(_ peer: SocketAddress) -> Bool {
        let proxies = settings.server.trustedProxies
        if proxies.isEmpty { return false }
        let ip = peer.ipBytes
        return proxies.contains { $0.contains(ip) }
    }
}
