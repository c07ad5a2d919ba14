/// The enforcement dashboard's memory (docs/dashboard.md): per route, requests per Firebase category in one-minute
/// buckets for 7 days, and per App ID and per rejection reason in one-minute buckets for the last hour plus
/// one-hour buckets for the week. A value type: time comes in as an argument (unix seconds), never from a
/// clock of its own, so tests drive it with a manual clock.
///
/// Bounded: at most `maxRoutes` routes (the least recently active one makes room), `maxApps` App IDs and
/// `maxReasons` reasons per route (the rest counted as `other`); names longer than `maxNameBytes` are cut.
/// `boundBytes` is the resulting ceiling on the counters' memory (docs/dashboard.md).
package struct DashboardHistory: Sendable, Codable {
    /// Firebase's request-metrics categories, in this order everywhere (arrays of counts are indexed by it).
    package static let categories = ["verified", "outdated_client", "unknown_origin", "invalid", "reused"]
    /// The row collecting App IDs and reasons beyond the per-route limits.
    static let other = "other"
    static let maxRoutes = 32
    static let maxApps = 20
    static let maxReasons = 32
    static let maxNameBytes = 200
    static let weekMinutes = 7 * 24 * 60
    /// Marks a history file as ours (a foreign JSON file is refused, not misread).
    static let formatName = "appcheck-gateway dashboard history"
    static let formatVersion = 1

    /// The index of `name` in `categories`, or nil. Only for names read from outside (a history file, a test):
    /// the request path counts a `DashboardCategory`, never its text.
    package static func categoryIndex(_ name: String) -> Int? {
        DashboardCategory.allCases.first { $0.name == name }?.rawValue
    }

    struct Route: Sendable, Codable {
        var mode: String
        /// The last minute a request was folded in (for choosing which route gives way when full).
        var lastMinute: Int
        /// 5 counters per minute, 7 days.
        var categories = DashboardRing(width: 1, count: weekMinutes, stride: categoryCount)
        /// App ID per slot; slot `maxApps` is `other`.
        var apps: [String] = []
        var appMinutes = DashboardRing(width: 1, count: 60, stride: (maxApps + 1) * categoryCount)
        var appHours = DashboardRing(width: 60, count: 7 * 24, stride: (maxApps + 1) * categoryCount)
        /// Reason per slot; slot `maxReasons` is `other`.
        var reasons: [String] = []
        var reasonMinutes = DashboardRing(width: 1, count: 60, stride: maxReasons + 1)
        var reasonHours = DashboardRing(width: 60, count: 7 * 24, stride: maxReasons + 1)
        /// The DPoP bound share (SPEC §4.4): per bucket `[verified, bound]` (verified requests, and those of them whose
        /// token was bound to a key and came with a valid proof), in 60 one-minute and 168 one-hour buckets like App
        /// IDs, so both counts of a share always cover the same minutes. Nil only in a file written before they
        /// existed; the next fold makes them, and the share then covers the time since.
        var boundMinutes: DashboardRing? = DashboardRing(width: 1, count: 60, stride: 2)
        var boundHours: DashboardRing? = DashboardRing(width: 60, count: 7 * 24, stride: 2)

        init(mode: String, lastMinute: Int) {
            self.mode = mode
            self.lastMinute = lastMinute
        }

        var hasValidShape: Bool {
            categories.hasShape(width: 1, count: weekMinutes, stride: categoryCount)
                && appMinutes.hasShape(width: 1, count: 60, stride: (maxApps + 1) * categoryCount)
                && appHours.hasShape(width: 60, count: 7 * 24, stride: (maxApps + 1) * categoryCount)
                && reasonMinutes.hasShape(width: 1, count: 60, stride: maxReasons + 1)
                && reasonHours.hasShape(width: 60, count: 7 * 24, stride: maxReasons + 1)
                && apps.count <= maxApps && reasons.count <= maxReasons
                && boundMinutes?.hasShape(width: 1, count: 60, stride: 2) != false
                && boundHours?.hasShape(width: 60, count: 7 * 24, stride: 2) != false
        }

        var storageBytes: Int {
            categories.storageBytes + appMinutes.storageBytes + appHours.storageBytes + reasonMinutes.storageBytes
                + reasonHours.storageBytes + (boundMinutes?.storageBytes ?? 0) + (boundHours?.storageBytes ?? 0)
                + (apps + reasons).reduce(0) { $0 + $1.utf8.count }
        }

        /// The slot for `name`: its own, a free one, one whose counts have all aged out, or `other` (`limit`).
        static func slot(_ name: String, in names: inout [String], limit: Int, isEmpty: (Int) -> Bool) -> Int {
            if name == DashboardHistory.other { return limit }
            if let i = names.firstIndex(of: name) { return i }
            if names.count < limit {
                names.append(name)
                return names.count - 1
            }
            for i in 0..<names.count where isEmpty(i) {
                names[i] = name
                return i
            }
            return limit
        }
    }

    static let categoryCount = categories.count
    let format: String
    let version: Int
    private(set) var routes: [String: Route] = [:]

    init() {
        format = Self.formatName
        version = Self.formatVersion
    }

    /// The bytes the counters can take at most: `maxRoutes` full routes with names of `maxNameBytes`.
    static var boundBytes: Int {
        let route = Route(mode: "", lastMinute: 0)
        return maxRoutes * (route.storageBytes + (maxApps + maxReasons + 1) * maxNameBytes)
    }

    /// What the counters take now (rings plus names), for the memory-bound test and the JSON.
    var storageBytes: Int { routes.reduce(0) { $0 + $1.value.storageBytes + $1.key.utf8.count } }

    static func minute(_ now: Double) -> Int { now > 0 ? Int(now / 60) : 0 }

    static func cut(_ name: String) -> String {
        name.utf8.count <= maxNameBytes ? name : String(decoding: name.utf8.prefix(maxNameBytes), as: UTF8.self)
    }

    /// Adds one tally (the sum of every loop's counts since the last fold) at `now`.
    mutating func fold(_ tally: DashboardTally, now: Double) {
        let m = Self.minute(now)
        for (rawName, t) in tally.routes {
            let name = Self.cut(rawName)
            if routes[name] == nil { makeRoom() }
            // Taken out of the dictionary so the rings are uniquely referenced and change in place (no copy).
            var r = routes.removeValue(forKey: name) ?? Route(mode: t.mode, lastMinute: m)
            r.mode = t.mode
            r.lastMinute = max(r.lastMinute, m)
            for (i, n) in t.categories.enumerated() { r.categories.add(minute: m, offset: i, n) }
            // Advance first so a slot freed by aging is seen as empty.
            r.appMinutes.advance(toMinute: m); r.appHours.advance(toMinute: m)
            r.reasonMinutes.advance(toMinute: m); r.reasonHours.advance(toMinute: m)
            for (app, counts) in t.apps.sorted(by: { $0.key < $1.key }) {
                let stride = Self.categoryCount
                var names = r.apps
                let slot = Route.slot(Self.cut(app), in: &names, limit: Self.maxApps) { i in
                    r.appMinutes.isZero(offsets: (i * stride)..<((i + 1) * stride))
                        && r.appHours.isZero(offsets: (i * stride)..<((i + 1) * stride))
                }
                r.apps = names
                for (c, n) in counts.enumerated() {
                    r.appMinutes.add(minute: m, offset: slot * stride + c, n)
                    r.appHours.add(minute: m, offset: slot * stride + c, n)
                }
            }
            for (reason, n) in t.reasons.sorted(by: { $0.key < $1.key }) {
                var names = r.reasons
                let slot = Route.slot(Self.cut(reason), in: &names, limit: Self.maxReasons) { i in
                    r.reasonMinutes.isZero(offsets: i..<(i + 1)) && r.reasonHours.isZero(offsets: i..<(i + 1))
                }
                r.reasons = names
                r.reasonMinutes.add(minute: m, offset: slot, n)
                r.reasonHours.add(minute: m, offset: slot, n)
            }
            var boundMinutes = r.boundMinutes ?? DashboardRing(width: 1, count: 60, stride: 2)
            var boundHours = r.boundHours ?? DashboardRing(width: 60, count: 7 * 24, stride: 2)
            r.boundMinutes = nil; r.boundHours = nil
            for (offset, n) in [t.categories[0], t.bound].enumerated() {
                boundMinutes.add(minute: m, offset: offset, n)
                boundHours.add(minute: m, offset: offset, n)
            }
            r.boundMinutes = boundMinutes; r.boundHours = boundHours
            routes[name] = r
        }
    }

    /// At `maxRoutes`, drops the route that saw traffic least recently.
    private mutating func makeRoom() {
        guard routes.count >= Self.maxRoutes,
              let oldest = routes.min(by: { ($0.value.lastMinute, $0.key) < ($1.value.lastMinute, $1.key) })?.key else { return }
        routes[oldest] = nil
    }

    /// True when a decoded file has our format and every ring its expected shape.
    var isValid: Bool {
        format == Self.formatName && version == Self.formatVersion && routes.count <= Self.maxRoutes
            && routes.values.allSatisfy(\.hasValidShape)
    }

    // MARK: reading

    /// One of the dashboard's windows: its length and its chart resolution, both in minutes.
    struct Window: Sendable {
        var name: String
        var minutes: Int
        var resolution: Int
        static let hour = Window(name: "hour", minutes: 60, resolution: 1)
        static let day = Window(name: "day", minutes: 24 * 60, resolution: 15)
        static let week = Window(name: "week", minutes: weekMinutes, resolution: 120)
        static let all = [hour, day, week]
    }

    /// A route's numbers for one window at `now`.
    struct WindowStats: Sendable, Equatable {
        /// By category index.
        var counts: [Int]
        /// Chart points, oldest first: the first minute of each point (unix minute) and its counts by category.
        var series: [(minute: Int, counts: [Int])]
        /// Rejection reasons with counts, largest first (`other` included when non-zero).
        var reasons: [(name: String, count: Int)]
        /// App IDs with counts by category, largest total first.
        var apps: [(name: String, counts: [Int])]
        /// Verified requests and, of them, bound ones (DPoP), over the App IDs' range (`Route.boundMinutes`).
        var boundVerified = 0
        var bound = 0
        /// Requests in the window (all categories).
        var total: Int { counts.reduce(0, +) }

        static func == (a: WindowStats, b: WindowStats) -> Bool {
            a.counts == b.counts && a.series.map(\.minute) == b.series.map(\.minute)
                && a.series.map(\.counts) == b.series.map(\.counts) && a.reasons.map(\.name) == b.reasons.map(\.name)
                && a.reasons.map(\.count) == b.reasons.map(\.count) && a.apps.map(\.name) == b.apps.map(\.name)
                && a.apps.map(\.counts) == b.apps.map(\.counts) && a.boundVerified == b.boundVerified
                && a.bound == b.bound
        }
    }

    /// Route `name`'s counts over the last `window.minutes` minutes up to and including the minute of `now`.
    /// App IDs, reasons and the DPoP bound share: the last hour to the minute; the day and the week in whole clock hours (the
    /// current hour plus the 23 or 167 before it).
    func stats(route name: String, window: Window, now: Double) -> WindowStats? {
        guard let r = routes[name] else { return nil }
        let m = Self.minute(now)
        let first = m - window.minutes + 1
        let all = 0..<Self.categoryCount
        let counts = r.categories.sum(fromMinute: first, toMinute: m, offsets: all)
        var series: [(minute: Int, counts: [Int])] = []
        let res = window.resolution
        var start = (m / res) * res - (window.minutes / res - 1) * res
        while start <= m {
            series.append((start, r.categories.sum(fromMinute: start, toMinute: start + res - 1, offsets: all)))
            start += res
        }
        let hourly = window.minutes > 60
        let appRing = hourly ? r.appHours : r.appMinutes
        let reasonRing = hourly ? r.reasonHours : r.reasonMinutes
        let from = hourly ? (m / 60 - window.minutes / 60 + 1) * 60 : first
        var apps: [(name: String, counts: [Int])] = []
        for (i, app) in (r.apps + [Self.other]).enumerated() {
            let slot = app == Self.other ? Self.maxApps : i
            let c = appRing.sum(fromMinute: from, toMinute: m,
                                offsets: (slot * Self.categoryCount)..<((slot + 1) * Self.categoryCount))
            if c.reduce(0, +) > 0 { apps.append((app, c)) }
        }
        apps.sort { ($0.counts.reduce(0, +), $1.name) > ($1.counts.reduce(0, +), $0.name) }
        var reasons: [(name: String, count: Int)] = []
        for (i, reason) in (r.reasons + [Self.other]).enumerated() {
            let slot = reason == Self.other ? Self.maxReasons : i
            let n = reasonRing.sum(fromMinute: from, toMinute: m, offsets: slot..<(slot + 1))[0]
            if n > 0 { reasons.append((reason, n)) }
        }
        reasons.sort { ($0.count, $1.name) > ($1.count, $0.name) }
        let boundPair = (hourly ? r.boundHours : r.boundMinutes)?.sum(fromMinute: from, toMinute: m, offsets: 0..<2) ?? [0, 0]
        return WindowStats(counts: counts, series: series, reasons: reasons, apps: apps, boundVerified: boundPair[0],
                           bound: boundPair[1])
    }

    /// Route names with their latest mode, sorted by name.
    var routeModes: [(name: String, mode: String)] {
        routes.map { ($0.key, $0.value.mode) }.sorted { $0.name < $1.name }
    }
}

/// Firebase's request categories as the dashboard counts them (docs/operations.md), in the order of
/// `DashboardHistory.categories`: the raw value is the index. (`skipped` requests are not counted.)
package enum DashboardCategory: Int, CaseIterable, Sendable {
    case verified, outdatedClient, unknownOrigin, invalid, reused

    package var name: String { DashboardHistory.categories[rawValue] }
}
