import Foundation
import GatewayConfig
import Synchronization

/// `appcheck_issuer_exchanges_total{app_id,method,result}` (docs/issuer.md), process-wide, and the same counts per
/// dashboard window (last hour by minute, last day and week by whole clock hour) for `/dashboard.json`'s `issuer`
/// block. Labels are bounded: an `app_id` that is not configured and a method name that does not exist are counted
/// as `""` and `unknown`, so a client cannot grow the series without limit.
package final class IssuerMetrics: Sendable {
    package struct Key: Hashable, Sendable {
        package var appId: String
        package var method: String
        package var result: String
    }

    /// Recent counts of one key: 60 one-minute buckets and 168 one-hour buckets, each stamped with its minute or
    /// hour since the epoch so a bucket from an older lap reads as empty (1.8 KB per key).
    struct Recent: Sendable {
        var total = 0
        var minutes = [Int](repeating: 0, count: 60)
        var minuteStamps = [Int](repeating: -1, count: 60)
        var hours = [Int](repeating: 0, count: 168)
        var hourStamps = [Int](repeating: -1, count: 168)

        mutating func add(at now: Double) {
            total += 1
            let minute = Int((now / 60).rounded(.down)), hour = Int((now / 3600).rounded(.down))
            let m = minute % 60, h = hour % 168
            if minuteStamps[m] != minute { minuteStamps[m] = minute; minutes[m] = 0 }
            if hourStamps[h] != hour { hourStamps[h] = hour; hours[h] = 0 }
            minutes[m] += 1
            hours[h] += 1
        }

        /// Counts over the last hour (by minute), day and week (by clock hour, the current one included).
        func windows(at now: Double) -> (hour: Int, day: Int, week: Int) {
            let minute = Int((now / 60).rounded(.down)), hour = Int((now / 3600).rounded(.down))
            var lastHour = 0, day = 0, week = 0
            for i in 0..<60 where minuteStamps[i] > minute - 60 && minuteStamps[i] <= minute { lastHour += minutes[i] }
            for i in 0..<168 where hourStamps[i] > hour - 168 && hourStamps[i] <= hour {
                week += hours[i]
                if hourStamps[i] > hour - 24 { day += hours[i] }
            }
            return (lastHour, day, week)
        }
    }

    private let counts = Mutex<[Key: Recent]>([:])
    /// Tokens minted bound to a DPoP key (`IssuerDPoP`), since start (`/metrics`).
    package let bound = IssuerBoundCounter()
    /// The same per (app_id, method, "minted") and per dashboard window.
    private let boundRecent = Mutex<[Key: Recent]>([:])

    package init() {}

    /// The limits of docs/issuer.md (Limits) whose refusals `appcheck_issuer_limited_total{rule}` counts apart, so an
    /// operator sees which limit a flood hit: a fixed set, so the series stay bounded.
    package static let limitRules = ["body_budget_address", "body_budget_spent", "challenge_address_full", "challenge_store_full",
                             "debug_guesses_exhausted", "rate_limited", "rate_limited_address", "rate_limited_app"]
    private let limited = Mutex<[String: Int]>([:])

    /// Counts one issuer call; `bound`: a minted token bound to a DPoP key (`cnf.jkt`).
    package func count(_ outcome: IssuerOutcome, configuredApps: IssuerSettings, bound isBound: Bool = false,
                       now: Double = Date().timeIntervalSince1970) {
        let appId = configuredApps.app(outcome.appId) == nil ? "" : outcome.appId
        let known = outcome.method == "jwks" || outcome.method == "discovery" || IssuerMethod(rawValue: outcome.method) != nil
        let key = Key(appId: appId, method: known ? outcome.method : "unknown", result: outcome.result)
        counts.withLock { $0[key, default: Recent()].add(at: now) }
        if isBound && outcome.result == "minted" {
            bound.add(appId: outcome.appId, method: outcome.method)
            boundRecent.withLock { $0[key, default: Recent()].add(at: now) }
        }
        if Self.limitRules.contains(outcome.rule) { limited.withLock { $0[outcome.rule, default: 0] += 1 } }
    }

    private func sortedSnapshot() -> [(Key, Recent)] {
        counts.withLock { $0 }.sorted { ($0.key.appId, $0.key.method, $0.key.result) < ($1.key.appId, $1.key.method, $1.key.result) }
    }

    /// Every (app_id, method, result) seen with its count since start, sorted (for `/metrics`).
    package func totals() -> [(key: Key, total: Int)] {
        sortedSnapshot().map { ($0.0, $0.1.total) }
    }

    /// Refusals per limit rule since start (for `/metrics`).
    package func limitedCounts() -> [String: Int] { limited.withLock { $0 } }

    /// The dashboard's `exchanges`: one entry per (app_id, method, result) seen, with its counts per window; a
    /// `minted` entry also has `bound`, the tokens of it bound to a DPoP key, per window the same way.
    package func exchanges(at now: Double) -> [[String: Any]] {
        let bound = boundRecent.withLock { $0 }
        return sortedSnapshot().map { key, recent in
            let w = recent.windows(at: now)
            var entry: [String: Any] = ["app_id": key.appId, "method": key.method, "result": key.result,
                                        "hour": w.hour, "day": w.day, "week": w.week, "total": recent.total]
            if key.result == "minted" {
                let b = bound[key] ?? Recent()
                let bw = b.windows(at: now)
                entry["bound"] = ["hour": bw.hour, "day": bw.day, "week": bw.week, "total": b.total]
            }
            return entry
        }
    }
}
