import EventLoop
import GatewayConfig

/// One route as the request path reads it, built once per configuration load (`Runtime`) and handed out by
/// reference (`Router.match`): an exchange holds one reference instead of copying `RouteSettings` (a struct whose
/// copies retain each of its reference-counted fields) or indexing back into the runtime's table on every read.
/// What a request would otherwise work out from the settings each time (the enforcement's log text, whether the
/// App Check step runs, the tunnel's idle bound, the upstream's protocol) is worked out here once.
///
/// Immutable: a reload builds new instances in its new `Runtime`; an exchange that started under the old
/// configuration keeps its old route until it ends.
public final class CompiledRoute: Sendable {
    /// The route's position in `Runtime.routes` (and `Settings.routes`): the key of the loop's per-route counters.
    public let index: Int
    /// `name`, for logs and metrics.
    public let name: String
    /// The path it matches (exact `path` or `prefix`).
    public let match: RouteMatch
    /// Upper-case method names; empty = any method.
    public let methods: [String]
    /// The upstream's index in `Settings.upstreams`, which is also the index of its pool in each loop
    /// (`UpstreamPools`).
    public let upstreamIndex: Int
    /// The upstream speaks HTTP/2 (`protocol: h2`): gRPC calls may go there.
    public let upstreamIsH2: Bool
    public let enforcement: Enforcement
    /// `enforcement`'s text (`enforce`, `monitor`, `off`) for the log line and metrics.
    public let mode: String
    /// The App Check step runs (`enforcement` is not `off`): a token in the URL is refused and the step is called.
    public let verifies: Bool
    public let replayProtection: Bool
    /// Resolved: the route's own `max_body_bytes` or `server.limits.max_body_bytes`.
    public let maxBodyBytes: Int64
    /// `forward_token`: the App Check header goes upstream unchanged.
    public let forwardToken: Bool
    public let corsPreflight: CORSPreflight
    /// `provider` claims admitted; empty = any.
    public let providers: Set<String>
    /// `providers` is not empty (most routes list none: then the set is never read).
    public let limitsProviders: Bool
    /// `max_risk`; nil = not checked.
    public let maxRisk: Int?
    /// `require_risk`: with `maxRisk`, a token without a `risk` claim is refused too.
    public let requireRisk: Bool
    /// `websocket: true`: upgrades are tunnelled (SPEC §6.1).
    public let websocket: Bool
    /// `stream_idle_timeout` in nanoseconds; nil when the route does not set it.
    public let streamIdleTimeoutNS: UInt64?
    /// A WebSocket tunnel's idle bound in nanoseconds: `stream_idle_timeout`, or
    /// `RouteSettings.defaultTunnelIdleTimeout` (5 minutes) when the route sets none.
    public let tunnelIdleTimeoutNS: UInt64
    /// `dpop` (SPEC §4.4); default `optional`.
    public let dpop: DPoPMode
    /// `dpop_max_age` in seconds; default 60.
    public let dpopMaxAge: Double

    /// `route` is entry `index` of a validated configuration; `upstream` is the upstream it names
    /// (`route.upstreamIndex`).
    public init(_ route: RouteSettings, index: Int, upstream: UpstreamSettings) {
        self.index = index
        name = route.name
        match = route.match
        methods = route.methods
        upstreamIndex = route.upstreamIndex
        upstreamIsH2 = upstream.httpProtocol == .h2
        enforcement = route.enforcement
        mode = route.enforcement.rawValue
        verifies = route.enforcement != .off
        replayProtection = route.replayProtection
        maxBodyBytes = route.maxBodyBytes
        forwardToken = route.forwardToken
        corsPreflight = route.corsPreflight
        providers = route.providers
        limitsProviders = !route.providers.isEmpty
        maxRisk = route.maxRisk
        requireRisk = route.requireRisk
        websocket = route.websocket
        streamIdleTimeoutNS = route.streamIdleTimeout.map { .nanoseconds($0) }
        tunnelIdleTimeoutNS = .nanoseconds(route.streamIdleTimeout ?? RouteSettings.defaultTunnelIdleTimeout)
        dpop = route.dpop
        dpopMaxAge = route.dpopMaxAge
    }

    /// The routes of `settings`, in file order. A route naming an upstream the configuration lacks (the loader never
    /// produces one) gets `protocol: http1`'s rules.
    public static func compile(_ settings: Settings) -> [CompiledRoute] {
        settings.routes.enumerated().map { i, route in
            let upstreams = settings.upstreams
            let upstream = upstreams.indices.contains(route.upstreamIndex)
                ? upstreams[route.upstreamIndex]
                : UpstreamSettings(name: "", scheme: "http", host: "", port: 0, basePath: "")
            return CompiledRoute(route, index: i, upstream: upstream)
        }
    }
}
