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
    }

    package init() {}

    /// By route name.
    var routes: [String: Route] = [:]

    package var isEmpty: Bool { routes.isEmpty }

    /// Counts one request whose App Check step ran. `outcome` is the Firebase category (`skipped` and unknown
    /// names are ignored); `reason` counts only for non-verified outcomes; `appId` is the verified `sub`, if any.
    package mutating func record(route: String, mode: String, category: DashboardCategory, reason: String?, appId: String?) {
        let i = category.rawValue
        Self.count(&routes[route, default: Route(mode: mode)], mode: mode, category: i, reason: reason, appId: appId)
    }

    private static func count(_ r: inout Route, mode: String, category i: Int, reason: String?, appId: String?) {
        r.mode = mode
        r.categories[i] += 1
        if i != 0, let reason {
            let key = r.reasons[reason] != nil || r.reasons.count < maxReasonsPerRoute ? reason : DashboardHistory.other
            r.reasons[key, default: 0] += 1
        }
        if let appId {
            // One hash of the App ID while the route has room (the usual case), in place through `default:`.
            let key = r.apps.count < maxAppsPerRoute || r.apps[appId] != nil ? appId : DashboardHistory.other
            r.apps[key, default: [Int](repeating: 0, count: DashboardHistory.categories.count)][i] += 1
        }
    }

    /// Adds another loop's tally.
    package mutating func add(_ other: DashboardTally) {
        for (name, o) in other.routes {
            var r = routes[name] ?? Route(mode: o.mode)
            r.mode = o.mode
            for i in 0..<r.categories.count { r.categories[i] += o.categories[i] }
            for (k, v) in o.reasons { r.reasons[k, default: 0] += v }
            for (k, v) in o.apps {
                var mine = r.apps[k] ?? [Int](repeating: 0, count: v.count)
                for i in 0..<mine.count { mine[i] += v[i] }
                r.apps[k] = mine
            }
            routes[name] = r
        }
    }
}
