import Dashboard

/// The counters of one event loop. Plain integers touched only on that loop's thread; a scrape visits
/// every loop (`EventLoop.execute`) to copy them and sums the copies, so counting takes no lock and no
/// atomic on the request path.
public struct LoopMetrics: Sendable {
    /// Firebase's request categories (docs/operations.md; the dashboard's `DashboardHistory.categories`) plus `skipped`.
    public static let outcomes = DashboardHistory.categories + ["skipped"]

    /// The index of `name` in `outcomes`, or nil (for text from outside; requests are counted by
    /// `AppCheckOutcome.Category.rawValue`).
    public static func outcomeIndex(_ name: String) -> Int? { outcomes.firstIndex(of: name) }
    /// Upper bounds (seconds) of `gateway_request_duration_seconds`.
    public static let durationBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    public struct Route: Sendable {
        public var mode: String
        public var outcomes = [Int](repeating: 0, count: LoopMetrics.outcomes.count)
        public var rejections: [String: Int] = [:]
        public var statuses: [Int: Int] = [:]
        public var buckets = [Int](repeating: 0, count: LoopMetrics.durationBuckets.count)
        public var durationSum = 0.0
        public var durationCount = 0
        /// Verified requests whose token was bound to a key and came with a valid DPoP proof (SPEC §4.4).
        public var dpopBound = 0

        public init(mode: String) { self.mode = mode }

        /// Adds `r`'s counts; the mode becomes `r`'s (the latest).
        public mutating func add(_ r: Route) {
            mode = r.mode
            for i in 0..<min(outcomes.count, r.outcomes.count) { outcomes[i] += r.outcomes[i] }
            for (k, v) in r.rejections { rejections[k, default: 0] += v }
            for (k, v) in r.statuses { statuses[k, default: 0] += v }
            for i in 0..<min(buckets.count, r.buckets.count) { buckets[i] += r.buckets[i] }
            durationSum += r.durationSum
            durationCount += r.durationCount
            dpopBound += r.dpopBound
        }
    }

    /// By route name (names survive reloads; a route's mode is its latest).
    public var routes: [String: Route] = [:]
    /// `gateway_requests_total` of requests with no route (`route=""`).
    public var unroutedStatuses: [Int: Int] = [:]
    public var tokenCacheHits = 0
    public var tokenCacheMisses = 0
    public var upstreamErrors: [UpstreamErrorKey: Int] = [:]
    public var connectionsActive = 0
    public var connectionsIdle = 0
    /// WebSocket tunnels open (each is counted in `connectionsActive` too).
    public var connectionsTunnel = 0
    public var tlsHandshakeFailures = 0
    /// New client connections closed at accept without an answer, by reason (`per_address`).
    public var connectionsRefused: [String: Int] = [:]
    /// HTTP/2 connections closed for protocol errors or abuse, by reason.
    public var h2ConnectionErrors: [String: Int] = [:]
    /// The enforcement dashboard's counts since its last fold (taken and reset by `DashboardService`; not
    /// summed by `add`, not part of `/metrics`).
    package var dashboard = DashboardTally()

    public struct UpstreamErrorKey: Hashable, Sendable {
        public var upstream: String
        public var kind: String

        public init(upstream: String, kind: String) {
            self.upstream = upstream
            self.kind = kind
        }
    }

    public init() {}

    public mutating func add(_ other: LoopMetrics) {
        for (name, r) in other.routes { routes[name, default: Route(mode: r.mode)].add(r) }
        for (k, v) in other.unroutedStatuses { unroutedStatuses[k, default: 0] += v }
        tokenCacheHits += other.tokenCacheHits
        tokenCacheMisses += other.tokenCacheMisses
        for (k, v) in other.upstreamErrors { upstreamErrors[k, default: 0] += v }
        connectionsActive += other.connectionsActive
        connectionsIdle += other.connectionsIdle
        connectionsTunnel += other.connectionsTunnel
        tlsHandshakeFailures += other.tlsHandshakeFailures
        for (k, v) in other.connectionsRefused { connectionsRefused[k, default: 0] += v }
        for (k, v) in other.h2ConnectionErrors { h2ConnectionErrors[k, default: 0] += v }
    }
}

/// Renders Prometheus text exposition format 0.0.4. Hand-written rather than swift-prometheus: the
/// counters live per loop as plain integers (summed on scrape), which a registry of shared atomic metrics
/// would not allow without putting atomics on the request path.
public struct MetricsText {
    public private(set) var text = ""

    public init() {}

    public mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    public mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
        text += name
        if !labels.isEmpty {
            text += "{" + labels.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " " + Self.format(value) + "\n"
    }

    public mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Int) {
        sample(name, labels, Double(value))
    }

    public static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    public static func format(_ v: Double) -> String {
        if v.isInfinite { return v > 0 ? "+Inf" : "-Inf" }
        if v.isNaN { return "NaN" }
        if v == v.rounded() && abs(v) < 1e15 { return String(Int(v)) }
        return String(v)
    }
}
