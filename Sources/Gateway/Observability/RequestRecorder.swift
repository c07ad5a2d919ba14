import ProxyCore
import Foundation
import Glibc
import HTTPWire
import JSONLog
import Dashboard
import EventLoop

/// What a loop records about requests (issue 22's split of the loop context): its counters (`metrics`, with the
/// dashboard's tally), the access log and the issuer's own lines, request ids, and the wall clock. Touched only on its
/// loop's thread.
package final class RequestRecorder {
    let loop: EventLoop
    let logSink: LogSink
    /// This loop's counters. Per-route request counters of configured routes wait in `routeSlots` until
    /// `foldRouteSlots()` (readers outside the request path call it first).
    package var metrics = LoopMetrics()
    package var clock = LoopClock()
    /// Counters of the routes of `slotTable`, by route index (nil: no request since the last fold).
    private var routeSlots: [RouteSlot?] = []
    private var slotTable: Runtime?
    private var logBuffer = IOBuffer(capacity: 16 * 1024)
    private var random = RequestIdGenerator()

    init(loop: EventLoop, logSink: LogSink) {
        self.loop = loop
        self.logSink = logSink
    }

    func countTLSHandshakeFailure() { metrics.tlsHandshakeFailures += 1 }

    func countH2ProtocolClose(_ reason: String) {
        metrics.h2ConnectionErrors[reason, default: 0] += 1
    }

    func flushLog() {
        guard !logBuffer.isEmpty else { return }
        logSink.write(logBuffer.readable)
        logBuffer.clear()
        logBuffer.shrinkIfIdle(to: 16 * 1024)
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

    package func newRequestId() -> String { random.next() }

    /// A new random id whose text is made only when read.
    func newRequestID() -> RequestID { RequestID(bits: random.nextBits()) }

    // MARK: logs and counters

    /// Counts and logs one finished request.
    func record(_ ex: Exchange) {
        let status = ex.status
        let seconds = Double(loop.refreshNow() &- ex.start) / 1e9
        if ex.hasRouteName {
            // The index read through the unretained route: binding the route itself retained it for the block.
            if let table = ex.routeTable, let i = ex.route?.index, i < table.routes.count {
                // A configured route: its slot by index (no hashing of the name); folded into `metrics` when read.
                if table !== slotTable {
                    foldRouteSlots()
                    slotTable = table
                    routeSlots = Array(repeating: nil, count: table.routes.count)
                }
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
            if ex.appCheckDecided {
                // The raw values agree (DashboardHistoryTests.categoriesAreTheMetricsOutcomesInOrder); `skipped` has none there.
                if let category = DashboardCategory(rawValue: Int(ex.appCheck.outcome.rawValue)) {
                    metrics.dashboard.record(route: ex.routeName, mode: ex.mode, category: category,
                                             reason: ex.appCheck.reason, appId: ex.appCheck.appId,
                                             bound: ex.appCheck.bound)
                }
            }
        } else {
            metrics.unroutedStatuses[status, default: 0] += 1
        }
        accessLog(ex, status: status)
    }

    /// Moves the per-index route counters into `metrics.routes` by route name. Whoever reads `metrics` from outside
    /// the request path (a scrape's snapshot, the worker's accessor) calls this first, on the loop thread.
    package func foldRouteSlots() {
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
        if ex.appCheckDecided {
            let outcome = ex.appCheck.outcome
            r.outcomes[Int(outcome.rawValue)] += 1
            if ex.appCheck.bound { r.dpopBound += 1 }
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
            line.begin(time: clock.date, severity: .warning)
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
        // A gRPC call (SPEC §6.1): the `grpc-status` it ended with (the gateway's or the upstream's).
        if let code = ex.grpc?.status { line.field("grpc_status", code) }
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
            line.field("outcome", ex.appCheckDecided ? ac.outcome.name : nil)
            line.field("reason", ac.reason)
            if let rule = ac.dpopRule { line.field("dpop_rule", rule) }
        }
        line.field("app_id", ac.appId)
        let app: String
        switch ac.status {
        case .verified: app = "VALID"
        case .missing: app = "MISSING"
        case .skipped: app = ac.tokenSHA256 == nil ? "MISSING" : "INVALID"
        case .invalid, .reused: app = "INVALID"
        }
        // A built-in handler (the issuer) expects no token: no verdict, rather than a MISSING that reads as one.
        if ex.builtin == nil { line.field("verifications", raw: "{\"app\":\"\(app)\"}") }
        line.field("token_sha256", ac.tokenSHA256)
        if case .ended(let bytesIn, let bytesOut, let outcome) = ex.tunnel {
            // A WebSocket tunnel's one line, when it ends (SPEC §6.1).
            line.field("bytes_in", Int(bytesIn))
            line.field("bytes_out", Int(bytesOut))
            line.field("tunnel_end", outcome.rawValue)
        } else if ex.route?.streamIdleTimeoutNS != nil {
            // A stream's line (a route with `stream_idle_timeout`: server-sent events, long polls; SPEC §6.1): request
            // body bytes from the client, response body bytes relayed to the client (0 when none came).
            line.field("bytes_in", Int(ex.machine.bodyReceived))
            if case .stream(let bytesOut) = ex.tunnel { line.field("bytes_out", Int(bytesOut)) } else { line.field("bytes_out", 0) }
        }
        line.end()
        line.bytes.withUnsafeBytes { logBuffer.append($0) }
        if !ex.logFields.isEmpty {
            // A built-in handler's own line (the issuer's: app_id, method, result, rule), tied by request_id.
            var own = JSONLine()
            own.begin(time: clock.date, severity: .info)
            own.field("message", "\(ex.routeName) exchange")
            own.field("request_id", ex.requestId)
            for (name, value) in ex.logFields { own.field(name, value) }
            own.end()
            own.bytes.withUnsafeBytes { logBuffer.append($0) }
        }
        if logBuffer.readableCount > 64 * 1024 { flushLog() }
    }
}
