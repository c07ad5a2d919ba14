import AppCheck
import CSystemShims
import EventLoop
import Foundation
import GatewayConfig
import HTTPWire
import JSONLog
import ReplayStores

/// The connections of a loop, as the request path sees them: where a connection reports that it closed or that it
/// now speaks HTTP/2. The `Worker` implements it.
protocol ConnectionTable: AnyObject {
    func connectionClosed(_ conn: ClientConnection)
    func h2ConnectionClosed(_ conn: H2Connection)
    /// The socket of `conn` continues as an HTTP/2 connection with `initial` bytes already read.
    func handOver(_ conn: ClientConnection, initial: UnsafeRawBufferPointer)
}

/// What one event loop's request path needs, and nothing else: the loop (clock, timers), the runtime (limits,
/// routes, policy), the upstream pools, the App Check step with its key sets and replay client, the built-in
/// handlers, the request-id generator, the metrics and the access log. Connections, exchanges, pools and the App
/// Check step hold this instead of the `Worker`, so none of them reaches listeners or other connections.
/// Touched only on its loop's thread.
final class LoopContext {
    let loop: EventLoop
    let logSink: LogSink
    private(set) var runtime: Runtime
    private var pools: [UpstreamPool] = []
    private(set) var appCheck: AppCheckStep!
    /// This loop's view of Firebase's key set; replaced through `setKeys`.
    private(set) var keys: LoopKeys?
    var keyProvider: KeyRefetching?
    /// The gateway's own issuer's public keys (docs/issuer.md), a second key set beside Firebase's; nil without
    /// `issuer:`. Fixed at start.
    var ownKeys: JWKSet?
    /// The key sets of `app_check.trusted_issuers` (another deployment's issuer), in configuration order, each with
    /// the `iss` it vouches for; nil until first fetched. Replaced through `setTrustedKeys`.
    private(set) var trustedKeys: [LoopKeys?] = []
    /// Requests the gateway answers itself (the issuer's API), matched before routes.
    var builtins: [BuiltinHandler] = []
    var replayClient: ReplayClient?
    /// Client stream resets across connections and loops (set by the worker).
    var resetBudget: ClientResetBudget?
    /// Process-wide counters (set by the worker).
    var shared: SharedState?
    /// This loop's counters. Per-route request counters of configured routes wait in `routeSlots` until
    /// `foldRouteSlots()` (readers outside the request path call it first).
    var metrics = LoopMetrics()
    /// Counters of the routes of `slotTable`, by route index (nil: no request since the last fold).
    private var routeSlots: [RouteSlot?] = []
    private var slotTable: Runtime?
    /// Set when the server drains: responses say `Connection: close`.
    var draining = false
    /// Where connections report closing (the worker; it outlives the context's connections).
    unowned(unsafe) var connections: ConnectionTable!
    private var logBuffer = IOBuffer(capacity: 16 * 1024)
    /// The read buffer client and upstream connections borrow while reading (`lendScratch`): a connection keeps a
    /// buffer of its own only for bytes left over after processing.
    private let scratch = IOBuffer(capacity: 64 * 1024)
    /// Where an exchange writes the upstream request head just before sending it (reused: no allocation per request).
    let requestHeadBuffer = IOBuffer(capacity: 4096)
    private var scratchLent = false

    /// The loop's shared read buffer, empty, or nil while another reader holds it (a read nested inside another
    /// connection's processing: an upstream's response finishing a client's exchange lets that client read on).
    @inline(__always)
    func lendScratch() -> IOBuffer? {
        if scratchLent { return nil }
        scratchLent = true
        return scratch
    }

    /// Takes the shared read buffer back (its bytes were processed or copied out).
    @inline(__always)
    func returnScratch() {
        scratch.clear()
        scratchLent = false
    }
    /// A shared, always-empty buffer standing in for a connection's input when nothing is pending.
    /// Never written to: a connection swaps in `scratch` or a buffer of its own before appending.
    let emptyBuffer = IOBuffer(capacity: IOBuffer.releasedCapacity)
    private var random: RequestIdGenerator
    private var clock = WallClockCache()

    init(loop: EventLoop, runtime: Runtime, logSink: LogSink) {
        self.loop = loop
        self.runtime = runtime
        self.logSink = logSink
        random = RequestIdGenerator()
        pools = makePools(runtime)
        appCheck = AppCheckStep(context: self,
                                cacheCapacity: runtime.settings.appCheck.tokenCacheSize / max(1, runtime.settings.server.threads))
        // One hook, and unowned(unsafe): the context lives as long as its loop runs, and a checked unowned or strong
        // capture would cost a reference-count round trip on every batch of events.
        loop.afterBatch.append { [unowned(unsafe) self] in
            self.runInputTurns()
            self.flushH2Connections()
            self.flushLog()
        }
    }

    /// Wall-clock seconds (Unix time) for token checks (`iat`, `exp`, the token cache, key-set staleness): the one
    /// place the request path reads the wall clock, so a test can set it. Monotonic time is `loop.now`.
    var wallClockSource: () -> Double = { Date().timeIntervalSince1970 }
    var wallClock: Double { wallClockSource() }

    private func makePools(_ runtime: Runtime) -> [UpstreamPool] {
        runtime.settings.upstreams.enumerated().map { i, u in
            UpstreamPool(settings: u, addresses: runtime.upstreamAddresses[i], tls: runtime.upstreamTLS[i], context: self)
        }
    }

    func pool(for index: Int) -> UpstreamPool { pools[index] }

    /// A new key set for this loop; requests waiting on an unknown `kid` verify again.
    func setKeys(_ keys: LoopKeys) {
        self.keys = keys
        appCheck.keysChanged()
    }

    /// A new key set for trusted issuer `index`.
    func setTrustedKeys(_ keys: LoopKeys, index: Int) {
        if trustedKeys.count <= index { trustedKeys += Array(repeating: nil, count: index + 1 - trustedKeys.count) }
        trustedKeys[index] = keys
    }

    /// Switches to a new configuration generation; requests in flight finish on the old one. Pools to an
    /// unchanged endpoint are kept (with their idle connections); the others retire.
    func apply(_ new: Runtime) {
        let old = runtime
        runtime = new
        var newPools: [UpstreamPool] = []
        for (i, u) in new.settings.upstreams.enumerated() {
            if let j = old.settings.upstreams.firstIndex(where: { $0.name == u.name }),
               sameEndpoint(old.settings.upstreams[j], u), j < pools.count, pools[j].addresses.count == new.upstreamAddresses[i].count {
                newPools.append(pools[j])
            } else {
                newPools.append(UpstreamPool(settings: u, addresses: new.upstreamAddresses[i], tls: new.upstreamTLS[i],
                                             context: self))
            }
        }
        for p in pools where !newPools.contains(where: { $0 === p }) { p.retire() }
        pools = newPools
    }

    private func sameEndpoint(_ a: UpstreamSettings, _ b: UpstreamSettings) -> Bool {
        a.scheme == b.scheme && a.host == b.host && a.port == b.port && a.basePath == b.basePath
            && a.connectTimeout == b.connectTimeout && a.responseTimeout == b.responseTimeout
            && a.maxIdleConnections == b.maxIdleConnections && a.caFile == b.caFile
    }

    /// Closes idle upstream connections and makes busy ones close when done (shutdown).
    func retirePools() {
        for p in pools { p.retire() }
    }

    func countTLSHandshakeFailure() { metrics.tlsHandshakeFailures += 1 }

    func countH2ProtocolClose(_ reason: String) {
        metrics.h2ConnectionErrors[reason, default: 0] += 1
    }

    // MARK: request ids

    /// The client's `X-Request-Id` when it is valid (1–128 of `A–Z a–z 0–9 - _ . :`), else a new one.
    func requestId(from headers: HTTPHeaders) -> String { requestID(from: headers).string }

    /// The client's valid `X-Request-Id`, or new random bits (their text is made only when something reads it).
    func requestID(from headers: HTTPHeaders) -> RequestID {
        if let i = headers.firstIndex(ofLiteral: "x-request-id") {
            let ok = headers.withValueBytes(at: i) { v -> Bool in
                guard v.count >= 1 && v.count <= 128 else { return false }
                for b in v {
                    switch b {
                    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                         UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                         UInt8(ascii: "."), UInt8(ascii: ":"):
                        continue
                    default:
                        return false
                    }
                }
                return true
            }
            if ok { return RequestID(client: headers.value(at: i)) }
        }
        return RequestID(bits: random.nextBits())
    }

    func newRequestId() -> String { random.next() }

    /// A new random id whose text is made only when read.
    func newRequestID() -> RequestID { RequestID(bits: random.nextBits()) }

    // MARK: logs and counters

    /// Counts and logs one finished request.
    func record(_ ex: Exchange) {
        let status = ex.status
        let seconds = Double(loop.refreshNow() &- ex.start) / 1e9
        if !ex.routeName.isEmpty {
            if let table = ex.routeTable, ex.routeIndex >= 0, ex.routeIndex < table.routes.count {
                // A configured route: its slot by index (no hashing of the name); folded into `metrics` when read.
                if table !== slotTable {
                    foldRouteSlots()
                    slotTable = table
                    routeSlots = Array(repeating: nil, count: table.routes.count)
                }
                let i = ex.routeIndex
                if routeSlots[i] == nil { routeSlots[i] = RouteSlot(route: LoopMetrics.Route(mode: ex.mode)) }
                Self.count(&routeSlots[i]!.route, ex, status: nil, seconds: seconds)
                if status >= 0 && status < RouteSlot.statusLimit {
                    routeSlots[i]!.statusCounts[status] += 1
                } else {
                    routeSlots[i]!.route.statuses[status, default: 0] += 1
                }
            } else {
                // A built-in handler: by name, in place through the dictionary's modify accessor.
                Self.count(&metrics.routes[ex.routeName, default: LoopMetrics.Route(mode: ex.mode)], ex, status: status,
                           seconds: seconds)
            }
            if ex.appCheckRan {
                metrics.dashboard.record(route: ex.routeName, mode: ex.mode, outcome: ex.appCheck.outcome.name,
                                         reason: ex.appCheck.reason, appId: ex.appCheck.appId)
            }
        } else {
            metrics.unroutedStatuses[status, default: 0] += 1
        }
        accessLog(ex, status: status)
    }

    /// Moves the per-index route counters into `metrics.routes` by route name. Whoever reads `metrics` from outside
    /// the request path (a scrape's snapshot, the worker's accessor) calls this first, on the loop thread.
    func foldRouteSlots() {
        guard let table = slotTable else { return }
        for i in routeSlots.indices {
            guard let slot = routeSlots[i] else { continue }
            var route = slot.route
            for (code, n) in slot.statusCounts.enumerated() where n > 0 { route.statuses[code, default: 0] += n }
            metrics.routes[table.routes[i].name, default: LoopMetrics.Route(mode: route.mode)].add(route)
            routeSlots[i] = nil
        }
    }

    /// A configured route's counters between two folds; statuses below `statusLimit` by code in an array (no hashing
    /// per request).
    struct RouteSlot {
        static let statusLimit = 600
        var route: LoopMetrics.Route
        var statusCounts = [Int](repeating: 0, count: RouteSlot.statusLimit)
    }

    /// `status` nil: the caller counts the status itself.
    private static func count(_ r: inout LoopMetrics.Route, _ ex: Exchange, status: Int?, seconds: Double) {
        r.mode = ex.mode
        if ex.appCheckRan {
            let outcome = ex.appCheck.outcome
            r.outcomes[Int(outcome.rawValue)] += 1
            if outcome != .verified && outcome != .skipped, let reason = ex.appCheck.reason {
                r.rejections[reason, default: 0] += 1
            }
        }
        if let status { r.statuses[status, default: 0] += 1 }
        var b = 0
        while b < LoopMetrics.durationBuckets.count && seconds > LoopMetrics.durationBuckets[b] { b += 1 }
        if b < r.buckets.count { r.buckets[b] += 1 }
        r.durationSum += seconds
        r.durationCount += 1
    }

    func countUpstreamError(_ ex: Exchange, _ kind: UpstreamFailure) {
        metrics.upstreamErrors[.init(upstream: ex.pool?.settings.name ?? "", kind: kind.rawValue), default: 0] += 1
        if logSink.enabled(.warning) {
            var line = JSONLine()
            line.begin(time: Date(), severity: .warning)
            line.field("message", "upstream error")
            line.field("request_id", ex.requestId)
            line.field("route", ex.routeName)
            line.field("upstream", ex.pool?.settings.name ?? "")
            line.field("kind", kind.rawValue)
            line.end()
            line.bytes.withUnsafeBytes { logBuffer.append($0) }
        }
    }

    /// One access-log line per request (docs/operations.md). Never the query, the token, cookies or credentials.
    private func accessLog(_ ex: Exchange, status: Int) {
        guard logSink.enabled(.info) else { return }
        let now = loop.refreshNow()
        var line = JSONLine()
        line.bytes.append(contentsOf: "{\"time\":\"".utf8)
        line.bytes.append(contentsOf: clock.timestamp().utf8)
        line.bytes.append(contentsOf: "\",\"severity\":\"INFO\",\"message\":\"request\"".utf8)
        line.bytes.append(UInt8(ascii: ","))
        line.resumeAfterSeparator()
        line.field("request_id", ex.requestId)
        line.field("route", ex.routeName.isEmpty ? nil : ex.routeName)
        line.field("method", ex.method)
        line.field("path", ex.path)
        line.field("status", status)
        line.field("duration_ms", milliseconds: Double(now &- ex.start) / 1e6)
        if ex.upstreamStart != 0 && ex.upstreamEnd >= ex.upstreamStart {
            line.field("upstream_ms", milliseconds: Double(ex.upstreamEnd - ex.upstreamStart) / 1e6)
        } else {
            line.field("upstream_ms", raw: "null")
        }
        let ac = ex.appCheck
        if ex.closedByClient {
            // The log line only: metrics and the dashboard keep the App Check category.
            line.field("outcome", "client_closed")
            line.field("reason", "client_closed")
        } else {
            line.field("outcome", ex.appCheckRan ? ac.outcome.name : nil)
            line.field("reason", ac.reason)
        }
        line.field("app_id", ac.appId)
        let app: String
        switch ac.status {
        case .verified: app = "VALID"
        case .missing: app = "MISSING"
        case .skipped: app = ac.tokenSHA256 == nil ? "MISSING" : "INVALID"
        case .invalid, .reused: app = "INVALID"
        }
        line.field("verifications", raw: "{\"app\":\"\(app)\"}")
        line.field("token_sha256", ac.tokenSHA256)
        line.end()
        line.bytes.withUnsafeBytes { logBuffer.append($0) }
        if !ex.logFields.isEmpty {
            // A built-in handler's own line (the issuer's: app_id, method, result, rule), tied by request_id.
            var own = JSONLine()
            own.begin(time: Date(), severity: .info)
            own.field("message", "\(ex.routeName) exchange")
            own.field("request_id", ex.requestId)
            for (name, value) in ex.logFields { own.field(name, value) }
            own.end()
            own.bytes.withUnsafeBytes { logBuffer.append($0) }
        }
        if logBuffer.readableCount > 64 * 1024 { flushLog() }
    }

    /// HTTP/2 connections whose streams produced frames during this batch of events (`H2Connection.scheduleFlush`):
    /// each writes once at the end of the batch, so responses finished together share one TLS record and one
    /// write instead of one per stream event.
    private var h2FlushQueue: [H2Connection] = []

    /// Trims the heap one second after asked (`H2Connection.syncBuffered`): by then the streams' upstream
    /// connections and buffers of the burst are freed too.
    private let trimTimer = LoopTimer { CSystemShims_malloc_trim() }

    func scheduleMemoryTrim() {
        if !trimTimer.isArmed { loop.schedule(trimTimer, at: loop.now + 1_000_000_000) }
    }

    /// HTTP/1.1 connections whose exchange finished outside their own input loop with a next request waiting
    /// (`ClientConnection.scheduleInputTurn`): each takes it at the end of the batch.
    private var inputTurns: [ClientConnection] = []

    func scheduleInputTurn(_ connection: ClientConnection) {
        inputTurns.append(connection)
    }

    /// Runs after every batch of events: the common case (nothing queued) is one check.
    @inline(__always)
    private func runInputTurns() {
        if inputTurns.isEmpty { return }
        while !inputTurns.isEmpty {
            let due = inputTurns
            inputTurns.removeAll(keepingCapacity: true)
            for connection in due { connection.inputTurnDue() }
        }
    }

    func scheduleFlush(_ connection: H2Connection) {
        h2FlushQueue.append(connection)
    }

    private func flushH2Connections() {
        while !h2FlushQueue.isEmpty {
            let queued = h2FlushQueue
            h2FlushQueue.removeAll(keepingCapacity: true)
            for connection in queued { connection.scheduledFlushDue() }
        }
    }

    func flushLog() {
        guard !logBuffer.isEmpty else { return }
        logSink.write(logBuffer.readable)
        logBuffer.clear()
        logBuffer.shrinkIfIdle(to: 16 * 1024)
    }
}
