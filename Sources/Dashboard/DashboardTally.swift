/// The dashboard's counts of one event loop since the history last folded them in (docs/dashboard.md). Plain
/// integers touched only on that loop's thread, like `LoopMetrics`; the history takes the tally (and leaves an
/// empty one) on the loop's own thread once a minute and on each dashboard request, so counting takes no lock.
///
/// Bounded between two folds: at most `maxAppsPerRoute` App IDs and `maxReasonsPerRoute` reasons per route
/// keep their own entry, the rest are counted under `DashboardHistory.other`.
package struct DashboardTally: Sendable {
    static let maxAppsPerRoute = 64
    static let maxReasonsPerRoute = 64

    struct Route: Sendable {
        var mode: String
        /// By `DashboardHistory.categories` index.
        var categories = [Int](repeating: 0, count: DashboardHistory.categories.count)
        var reasons: [String: Int] = [:]
        /// Per App ID, counts by category index.
        var apps: [String: [Int]] = [:]
        /// Verified requests whose token was bound to a key and came with a valid DPoP proof (SPEC §4.4).
        var bound = 0
    }

    package init() {}

    /// By route name (the run being counted included).
    var routes: [String: Route] {
        guard let run else { return counted }
        var all = counted
        Self.count(&all[run.route, default: Route(mode: run.mode)], mode: run.mode, category: run.category, reason: nil,
                   appId: run.appId, bound: run.bound, times: run.times)
        return all
    }

    private var counted: [String: Route] = [:]

    /// Requests alike in everything counted (route, mode, category, App ID, bound; no reason counted), in a row, not yet added
    /// to `counted`: a client's keep-alive traffic is such a run, and counting it costs a comparison per request instead
    /// of hashing the route name and the App ID. Adding `times` at once gives what adding them one by one would (the
    /// App ID's entry, or `other` when the route is full, is the same for each).
    private struct Run {
        var route: String
        var mode: String
        var category: Int
        var appId: String?
        var bound: Bool
        var times: Int
    }
    private var run: Run?

    package var isEmpty: Bool { counted.isEmpty && run == nil }

    /// Counts one request whose App Check step ran. `outcome` is the Firebase category (`skipped` and unknown
    /// names are ignored); `reason` counts only for non-verified outcomes; `appId` is the verified `sub`, if any;
    /// `bound`: a verified request whose token was bound to a key and came with a valid DPoP proof.
    package mutating func record(route: String, mode: String, category: DashboardCategory, reason: String?, appId: String?,
                                 bound: Bool = false) {
        let i = category.rawValue
        let bound = bound && i == 0
        if i == 0 || reason == nil {
            if let r = run, r.category == i, r.bound == bound, r.route == route, r.mode == mode, r.appId == appId {
                run!.times += 1
                return
            }
            endRun()
            run = Run(route: route, mode: mode, category: i, appId: appId, bound: bound, times: 1)
            return
        }
        endRun()
        Self.count(&counted[route, default: Route(mode: mode)], mode: mode, category: i, reason: reason, appId: appId,
                   bound: bound)
    }

    /// Adds the run being counted to `counted`.
    private mutating func endRun() {
        guard let r = run else { return }
        run = nil
        Self.count(&counted[r.route, default: Route(mode: r.mode)], mode: r.mode, category: r.category, reason: nil,
                   appId: r.appId, bound: r.bound, times: r.times)
    }

    private static func count(_ r: inout Route, mode: String, category i: Int, reason: String?, appId: String?,
                              bound: Bool, times: Int = 1) {
        r.mode = mode
        r.categories[i] += times
        if bound { r.bound += times }
        if i != 0, let reason {
            let key = r.reasons[reason] != nil || r.reasons.count < maxReasonsPerRoute ? reason : DashboardHistory.other
            r.reasons[key, default: 0] += 1
        }
        if let appId {
            // One hash of the App ID while the route has room (the usual case), in place through `default:`.
            let key = r.apps.count < maxAppsPerRoute || r.apps[appId] != nil ? appId : DashboardHistory.other
            r.apps[key, default: [Int](repeating: 0, count: DashboardHistory.categories.count)][i] += times
        }
    }

    /// Adds another loop's tally.
    package mutating func add(_ other: DashboardTally) {
        endRun()
        for (name, o) in other.routes {
            var r = counted[name] ?? Route(mode: o.mode)
            r.mode = o.mode
            for i in 0..<r.categories.count { r.categories[i] += o.categories[i] }
            r.bound += o.bound
            for (k, v) in o.reasons { r.reasons[k, default: 0] += v }
            for (k, v) in o.apps {
                var mine = r.apps[k] ?? [Int](repeating: 0, count: v.count)
                for i in 0..<mine.count { mine[i] += v[i] }
                r.apps[k] = mine
            }
            counted[name] = r
        }
    }
}
