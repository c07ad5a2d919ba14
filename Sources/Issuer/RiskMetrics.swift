import Foundation
import Synchronization

/// What the issuer shows of App Attest fraud risk (docs/issuer.md "Fraud risk"), in one process:
///
/// - `appcheck_issuer_risk_metric{app_id}`: a histogram of the risk metric of every receipt the refresher stored
///   (one observation per refreshed receipt that carries a metric), buckets `riskBuckets` and `+Inf`;
/// - `appcheck_issuer_risk_refusals_total{app_id,rule}`: assertions refused for risk (`risk_metric_exceeded`,
///   `risk_metric_unknown`), also kept per dashboard window (hour, day, week);
/// - for the dashboard, the keys this process saw (attested, asserted or refreshed) in the last week, each in the
///   bucket of its latest known metric (or `unknown`), counted per window by when it was last seen.
///
/// Bounded: labels are the configured App Attest apps only; at most `maxKeys` keys are tracked (about 80 bytes
/// each), a key not seen for a week is forgotten, and when the table is full of keys seen this week a new key is
/// not tracked (counted in `untracked`).
package final class RiskMetrics: Sendable {
    /// Upper bounds (`le`) of the histogram's buckets, and the dashboard's key buckets (plus `+Inf` and
    /// `unknown`). Apple's metric counts attestations on one device in 30 days: 1 for a normal phone, a few after
    /// reinstalls, tens or more for a device attesting in a loop.
    package static let riskBuckets = [1, 2, 5, 10, 20, 50, 100]
    /// The dashboard's bucket names, in order: `unknown`, then each `le`, then `+Inf`.
    package static let bucketNames = ["unknown"] + riskBuckets.map(String.init) + ["+Inf"]
    /// The rules of assertions refused for risk (IssuerService+Receipts.swift).
    package static let refusalRules = ["risk_metric_exceeded", "risk_metric_unknown"]
    /// Keys tracked for the dashboard at most (about 8 MiB when full).
    package static let maxKeys = 100_000
    /// A key not seen for this long is forgotten (the dashboard's longest window).
    static let keyLifetime = 7 * 86_400.0

    struct KeyTag: Hashable { var high: UInt64, low: UInt64 }
    struct KeyEntry { var app: Int, bucket: Int, seen: Double }
    struct Histogram { var counts = [Int](repeating: 0, count: RiskMetrics.riskBuckets.count + 1), sum = 0, count = 0 }

    private struct State {
        var histograms: [Int: Histogram] = [:]
        var keys: [KeyTag: KeyEntry] = [:]
        var untracked = 0
        var lastSweep = 0.0
        var refusals: [String: IssuerMetrics.Recent] = [:]
    }

    /// The App Attest apps, in configuration order (labels are only ever these).
    package let apps: [String]
    private let index: [String: Int]
    private let state = Mutex(State())

    package init(apps: [String]) {
        self.apps = apps
        index = Dictionary(apps.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// The bucket of a metric: 0 for `unknown`, then 1... for each `le`, the last for `+Inf`.
    package static func bucket(_ metric: Int?) -> Int {
        guard let metric else { return 0 }
        return 1 + (riskBuckets.firstIndex { metric <= $0 } ?? riskBuckets.count)
    }

    /// A key was attested or asserted with `metric` (its latest known; nil: unknown) at `now`.
    package func sawKey(_ keyId: [UInt8], appId: String, metric: Int?, now: Double) {
        guard let app = index[appId] else { return }
        state.withLock { Self.track(&$0, keyId, app: app, metric: metric, now: now) }
    }

    /// The refresher stored a receipt of the key whose metric is `metric` (nil: Apple's receipt had none and no
    /// earlier one was known): observed in the histogram when known, and the key tracked.
    package func refreshed(_ keyId: [UInt8], appId: String, metric: Int?, now: Double) {
        guard let app = index[appId] else { return }
        state.withLock { state in
            if let metric {
                var h = state.histograms[app] ?? Histogram()
                h.counts[Self.bucket(metric) - 1] += 1
                h.sum += metric
                h.count += 1
                state.histograms[app] = h
            }
            Self.track(&state, keyId, app: app, metric: metric, now: now)
        }
    }

    /// An assertion of `appId` was refused for risk (`rule` one of `refusalRules`).
    package func refused(appId: String, rule: String, now: Double) {
        guard index[appId] != nil, Self.refusalRules.contains(rule) else { return }
        state.withLock { $0.refusals[appId + "\n" + rule, default: IssuerMetrics.Recent()].add(at: now) }
    }

    private static func track(_ state: inout State, _ keyId: [UInt8], app: Int, metric: Int?, now: Double) {
        guard keyId.count >= 16 else { return }
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<8 { high = high << 8 | UInt64(keyId[i]); low = low << 8 | UInt64(keyId[8 + i]) }
        let tag = KeyTag(high: high, low: low)
        if state.keys[tag] == nil, state.keys.count >= maxKeys {
            if now - state.lastSweep >= 60 {
                state.lastSweep = now
                state.keys = state.keys.filter { now - $0.value.seen < keyLifetime }
            }
            guard state.keys.count < maxKeys else { state.untracked += 1; return }
        }
        state.keys[tag] = KeyEntry(app: app, bucket: bucket(metric), seen: now)
    }

    /// Histogram per app for `/metrics`: cumulative counts per `le` (the last is `+Inf`), sum and count.
    package func histograms() -> [(appId: String, cumulative: [Int], sum: Int, count: Int)] {
        let histograms = state.withLock { $0.histograms }
        return apps.enumerated().map { i, appId in
            let h = histograms[i] ?? Histogram()
            var running = 0
            return (appId, h.counts.map { running += $0; return running }, h.sum, h.count)
        }
    }

    /// Refusals for risk since start, per app and rule, for `/metrics` (every app with every rule).
    package func refusalTotals() -> [(appId: String, rule: String, count: Int)] {
        let refusals = state.withLock { $0.refusals }
        return apps.flatMap { appId in Self.refusalRules.map { (appId, $0, refusals[appId + "\n" + $0]?.total ?? 0) } }
    }

    /// The dashboard's `issuer.risk` (docs/dashboard.md): per app, the keys seen in each window by bucket, and the
    /// refusals for risk per window; and the table's own bounds.
    package func dashboard(at now: Double) -> [String: Any] {
        let (keys, refusals, untracked) = state.withLock { ($0.keys, $0.refusals, $0.untracked) }
        let windows: [(String, Double)] = [("hour", 3600), ("day", 86_400), ("week", Self.keyLifetime)]
        var counts = [[[Int]]](repeating: [[Int]](repeating: [Int](repeating: 0, count: Self.bucketNames.count), count: 3),
                               count: apps.count)
        var tracked = 0
        for entry in keys.values where now - entry.seen < Self.keyLifetime {
            tracked += 1
            for (w, window) in windows.enumerated() where now - entry.seen < window.1 { counts[entry.app][w][entry.bucket] += 1 }
        }
        let perApp: [[String: Any]] = apps.enumerated().map { i, appId in
            var keyWindows: [String: Any] = [:]
            for (w, window) in windows.enumerated() {
                keyWindows[window.0] = Dictionary(uniqueKeysWithValues: zip(Self.bucketNames, counts[i][w]))
            }
            var refused: [String: Any] = [:]
            for rule in Self.refusalRules {
                let recent = refusals[appId + "\n" + rule] ?? IssuerMetrics.Recent()
                let w = recent.windows(at: now)
                refused[rule] = ["hour": w.hour, "day": w.day, "week": w.week, "total": recent.total]
            }
            return ["app_id": appId, "keys": keyWindows, "refusals": refused]
        }
        return ["buckets": Self.bucketNames, "apps": perApp, "tracked_keys": tracked, "max_keys": Self.maxKeys,
                "untracked_keys": untracked]
    }
}
