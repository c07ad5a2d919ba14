import Foundation
import GatewayConfig
import KeySets
import ReplayStores

/// `/dashboard.json` (docs/dashboard.md): per route its mode, and per window (hour, day, week) the counts and shares
/// per Firebase category, the verdict with its numbers, a chart series, the top reasons and App IDs; plus the
/// key set, the replay store, the issuer and the history's own size. The shape is documented in
/// docs/dashboard.md.
struct DashboardReport {
    var history: DashboardHistory
    var settings: Settings
    var now: Double
    var keySet: KeySetStatus?
    var replay: DashboardService.ReplayInfo?
    var issuerExchanges: (@Sendable (_ now: Double) -> [[String: Any]])?
    var issuerRisk: (@Sendable (_ now: Double) -> [String: Any])?
    /// The own issuer's published kids, the signing one first; nil without `issuer:`.
    var ownIssuerKids: [String]? = nil
    var historyFile: String
    var lastWrite: (at: Double?, error: String?)

    /// Reasons listed per window (the rest are summed under `more`).
    static let topReasons = 10

    func json() -> String {
        let object = build()
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
            return #"{"error":"dashboard could not be serialised"}"#
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func iso(_ t: Double) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: Date(timeIntervalSince1970: t))
    }

    static func rounded(_ x: Double) -> Double { (x * 1_000_000).rounded() / 1_000_000 }

    static func byCategory(_ counts: [Int]) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: zip(DashboardHistory.categories, counts))
    }

    func build() -> [String: Any] {
        var routes: [[String: Any]] = []
        var seen = Set<String>()
        for r in settings.routes {
            seen.insert(r.name)
            routes.append(route(r.name, mode: r.enforcement.rawValue, dpop: r.dpop.rawValue, inConfig: true))
        }
        for (name, mode) in history.routeModes where !seen.contains(name) {
            routes.append(route(name, mode: mode, dpop: nil, inConfig: false))
        }
        return [
            "generated_at": Self.iso(now),
            "now": Int(now),
            "categories": DashboardHistory.categories,
            "settings": [
                "min_requests": settings.dashboard.minRequests,
                "ready_share": settings.dashboard.readyShare,
                "outdated_limit": DashboardVerdict.outdatedLimit,
                "invalid_unknown_limit": DashboardVerdict.suspiciousLimit,
                "reused_limit": DashboardVerdict.reusedLimit,
            ] as [String: Any],
            "windows": DashboardHistory.Window.all.map {
                ["name": $0.name, "minutes": $0.minutes, "resolution_minutes": $0.resolution] as [String: Any]
            },
            "routes": routes,
            "key_set": keySetBlock(),
            "replay_store": replayBlock(),
            "issuer": issuerBlock(),
            "history": [
                "bytes": history.storageBytes,
                "bound_bytes": DashboardHistory.boundBytes,
                "max_routes": DashboardHistory.maxRoutes,
                "max_app_ids_per_route": DashboardHistory.maxApps,
                "max_reasons_per_route": DashboardHistory.maxReasons,
                "file": historyFile.isEmpty ? NSNull() : historyFile,
                "last_write": lastWrite.at.map(Self.iso) ?? NSNull(),
                "last_write_error": lastWrite.error ?? NSNull(),
            ] as [String: Any],
        ]
    }

    /// `dpop`: the route's `dpop` key (`optional` or `required`), nil for a route no longer in the config.
    private func route(_ name: String, mode: String, dpop: String?, inConfig: Bool) -> [String: Any] {
        var windows: [String: Any] = [:]
        for w in DashboardHistory.Window.all {
            let stats = history.stats(route: name, window: w, now: now)
            windows[w.name] = window(stats, w)
        }
        return ["name": name, "mode": mode, "dpop": dpop ?? NSNull(), "in_config": inConfig, "windows": windows]
    }

    /// The share `part / whole`, 0 when `whole` is 0.
    static func share(_ part: Int, of whole: Int) -> Double { whole > 0 ? rounded(Double(part) / Double(whole)) : 0 }

    private func window(_ stats: DashboardHistory.WindowStats?, _ w: DashboardHistory.Window) -> [String: Any] {
        let counts = stats?.counts ?? [Int](repeating: 0, count: DashboardHistory.categories.count)
        let total = counts.reduce(0, +)
        let verdict = DashboardVerdict(counts: counts, minRequests: settings.dashboard.minRequests,
                                       readyShare: settings.dashboard.readyShare)
        var shares: [String: Double] = [:]
        for (i, c) in DashboardHistory.categories.enumerated() {
            shares[c] = total > 0 ? Self.rounded(Double(counts[i]) / Double(total)) : 0
        }
        let m = DashboardHistory.minute(now)
        let firstPoint = stats?.series.first?.minute ?? ((m / w.resolution) * w.resolution - (w.minutes / w.resolution - 1) * w.resolution)
        let reasons = stats?.reasons ?? []
        return [
            "total": total,
            "counts": Self.byCategory(counts),
            "shares": shares,
            "verdict": [
                "verdict": verdict.kind.rawValue,
                "because": verdict.because,
                "total": verdict.total,
                "verified_share": Self.rounded(verdict.verifiedShare),
                "outdated_share": Self.rounded(verdict.outdatedShare),
                "invalid_unknown_share": Self.rounded(verdict.suspiciousShare),
                "reused_share": Self.rounded(verdict.reusedShare),
                "alert": verdict.alert,
            ] as [String: Any],
            "series": [
                "start": firstPoint * 60,
                "step_seconds": w.resolution * 60,
                // One array of counts per point, in `categories` order (compact for week charts).
                // A route with no history yet gets the window's zero points, so its chart spans the window too.
                "points": stats?.series.map(\.counts)
                    ?? [[Int]](repeating: [Int](repeating: 0, count: DashboardHistory.categories.count),
                               count: w.minutes / w.resolution),
            ] as [String: Any],
            "reasons": reasons.prefix(Self.topReasons).map { ["reason": $0.name, "count": $0.count] as [String: Any] },
            "more_reasons": reasons.dropFirst(Self.topReasons).reduce(0) { $0 + $1.count },
            "app_ids": (stats?.apps ?? []).map {
                ["app_id": $0.name, "total": $0.counts.reduce(0, +), "counts": Self.byCategory($0.counts)] as [String: Any]
            },
            // Of the verified requests, those whose token was bound to a key and came with a valid DPoP proof (SPEC
            // §4.4), over the App IDs' range (whole clock hours for the day and week).
            "dpop": ["verified": stats?.boundVerified ?? 0, "bound": stats?.bound ?? 0,
                     "bound_share": Self.share(stats?.bound ?? 0, of: stats?.boundVerified ?? 0)] as [String: Any],
            // App IDs, reasons and the bound share over the day and week are counted in whole clock hours.
            "breakdown_resolution_minutes": w.minutes > 60 ? 60 : 1,
        ]
    }

    /// Firebase's key set (`status` ok, stale or missing; `not used` under `app_check.jwks.url: none`, which is a
    /// choice, not a fault) and, with `issuer:`, `own_issuer`: the keys the gateway signs with itself.
    private func keySetBlock() -> [String: Any] {
        var block = firebaseKeySetBlock()
        if let kids = ownIssuerKids {
            block["own_issuer"] = ["keys": kids.count, "kids": kids, "signs_with": kids.first ?? NSNull(),
                                   "source": "signing_keys (local)"] as [String: Any]
        }
        return block
    }

    private func firebaseKeySetBlock() -> [String: Any] {
        if settings.appCheck.jwks.isNone {
            return ["status": "not used", "note": "app_check.jwks.url is none: Firebase-issued tokens are refused",
                    "jwks_url": settings.appCheck.jwks.url]
        }
        guard let k = keySet else { return ["status": "not configured"] }
        let status = !k.isReady ? "missing" : k.isStale ? "stale" : "ok"
        return [
            "status": status,
            "keys": k.keyCount,
            "kids": k.kids,
            "age_seconds": k.ageSeconds.map { Int($0) } ?? NSNull(),
            "source": k.source?.rawValue ?? NSNull(),
            "last_fetch": k.lastError.map { "error: " + $0 } ?? (k.successfulFetches > 0 ? "ok" : "none yet"),
            "fetches": ["success": k.successfulFetches, "error": k.failedFetches],
            "jwks_url": settings.appCheck.jwks.url,
        ]
    }

    private func replayBlock() -> [String: Any] {
        guard let r = replay else {
            return ["status": "not configured", "store": NSNull(),
                    "note": "no route has replay_protection: true"]
        }
        let problem = r.problem()
        return [
            "status": problem.map { "error: " + $0 } ?? "ok",
            "store": r.store,
            "consumed": r.counters.consumed,
            "reused": r.counters.reused,
            "errors": r.counters.errors,
        ]
    }

    /// The issuer (docs/issuer.md): one entry per (app_id, method, result) seen since start, with its counts over the
    /// last hour (by minute), day and week (by clock hour) and since start, e.g.
    /// `{"app_id": "1:…:ios:…", "method": "exchangeAppAttestAssertion", "result": "minted", "hour": 3, "day": 40,
    /// "week": 301, "total": 301}` (`result`: `minted` or the refusal category, as in
    /// `appcheck_issuer_exchanges_total`). Kept in memory: a restart starts it again. `risk`: App Attest fraud risk
    /// (`RiskMetrics.dashboard(at:)`): per App Attest app the keys seen per metric bucket and the refusals for risk,
    /// per window. `bound`: per window, the tokens minted and those of them bound to a DPoP key (`cnf.jkt`) with
    /// their share, summed over the `minted` entries (each of which has its own `bound` counts).
    func issuerBlock() -> [String: Any] {
        guard let issuerExchanges else { return ["status": "not configured", "configured": false, "exchanges": [] as [Any]] }
        let exchanges = issuerExchanges(now)
        var bound: [String: Any] = [:]
        for w in DashboardHistory.Window.all {
            var minted = 0, boundTokens = 0
            for e in exchanges where e["result"] as? String == "minted" {
                minted += e[w.name] as? Int ?? 0
                boundTokens += (e["bound"] as? [String: Int])?[w.name] ?? 0
            }
            bound[w.name] = ["minted": minted, "bound": boundTokens, "bound_share": Self.share(boundTokens, of: minted)]
        }
        var block: [String: Any] = ["status": "ok", "configured": true, "exchanges": exchanges, "bound": bound]
        if let issuerRisk { block["risk"] = issuerRisk(now) }
        return block
    }
}
