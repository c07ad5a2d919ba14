@testable import Dashboard
import Foundation
@testable import Gateway
@testable import ProxyCore
import Testing

/// The dashboard's history as a value driven by a manual clock (docs/dashboard.md).
@Suite struct DashboardHistoryTests {
    /// A manual clock: unix seconds, moved by the test.
    struct ManualClock {
        var now: Double = 1_800_000_000 // a whole hour: 2027-01-15T08:00:00Z
        mutating func advance(minutes: Double) { now += minutes * 60 }
    }

    static func tally(_ outcomes: [String: Int], route: String = "api", mode: String = "monitor",
                      reason: String? = nil, appId: String? = nil) -> DashboardTally {
        var t = DashboardTally()
        for (outcome, n) in outcomes.sorted(by: { $0.key < $1.key }) {
            guard let category = DashboardCategory.allCases.first(where: { $0.name == outcome }) else { continue }
            for _ in 0..<n { t.record(route: route, mode: mode, category: category, reason: outcome == "verified" ? nil : reason, appId: appId) }
        }
        return t
    }

    @Test func tallyCountsCategoriesReasonsAndApps() {
        var t = DashboardTally()
        t.record(route: "r", mode: "enforce", category: .verified, reason: nil, appId: "app1")
        t.record(route: "r", mode: "enforce", category: .invalid, reason: "bad_signature", appId: nil)
        t.record(route: "r", mode: "enforce", category: .reused, reason: "reused", appId: "app1")
        t.record(route: "r", mode: "enforce", category: .verified, reason: "ignored-on-verified", appId: nil)
        #expect(t.routes["r"]?.categories == [2, 0, 0, 1, 1])
        #expect(t.routes["r"]?.reasons == ["bad_signature": 1, "reused": 1])
        #expect(t.routes["r"]?.apps == ["app1": [1, 0, 0, 0, 1]])
    }

    /// The dashboard's categories and the metrics' outcomes share one index lookup: same names, same order, and the
    /// lookup finds every name and nothing else.
    @Test func categoriesAreTheMetricsOutcomesInOrder() {
        #expect(DashboardHistory.categories == Array(LoopMetrics.outcomes.prefix(DashboardHistory.categories.count)))
        for (i, name) in LoopMetrics.outcomes.enumerated() { #expect(LoopMetrics.outcomeIndex(name) == i) }
        for name in ["", "skippeD", "invalidx", "Verified", "other", "outdated_clienT", "unknown-origin", "skipped "] {
            #expect(LoopMetrics.outcomeIndex(name) == nil, "\(name)")
        }
        #expect(DashboardHistory.categoryIndex("skipped") == nil)
        #expect(DashboardHistory.categoryIndex("reused") == 4)
        // The gateway's categories are the dashboard's by raw value, `skipped` last and not the dashboard's.
        for category in DashboardCategory.allCases {
            #expect(AppCheckOutcome.Category(rawValue: UInt8(category.rawValue))?.name == category.name)
        }
        #expect(DashboardCategory(rawValue: Int(AppCheckOutcome.Category.skipped.rawValue)) == nil)
    }

    @Test func tallyBoundsAppIdsBetweenFolds() {
        var t = DashboardTally()
        for i in 0..<(DashboardTally.maxAppsPerRoute + 10) {
            t.record(route: "r", mode: "enforce", category: .verified, reason: nil, appId: "app-\(i)")
        }
        #expect(t.routes["r"]?.apps.count == DashboardTally.maxAppsPerRoute + 1)
        #expect(t.routes["r"]?.apps[DashboardHistory.other]?[0] == 10)
    }

    /// Requests alike in a row are counted as one run (a comparison per request, no hashing): whatever the order,
    /// interleaving and cap, the counts read at any moment are those of counting each request on its own.
    @Test func runsOfLikeRequestsCountAsEachOnItsOwn() {
        var t = DashboardTally()
        for _ in 0..<3 { t.record(route: "r", mode: "monitor", category: .verified, reason: nil, appId: "app1") }
        #expect(t.routes["r"]?.categories == [3, 0, 0, 0, 0])  // read while the run is open
        #expect(!t.isEmpty)
        t.record(route: "r", mode: "enforce", category: .verified, reason: nil, appId: "app1")
        t.record(route: "r", mode: "enforce", category: .invalid, reason: "expired", appId: nil)
        t.record(route: "r", mode: "enforce", category: .invalid, reason: "expired", appId: nil)
        t.record(route: "s", mode: "enforce", category: .verified, reason: nil, appId: "app1")
        t.record(route: "r", mode: "enforce", category: .unknownOrigin, reason: nil, appId: nil)
        t.record(route: "r", mode: "enforce", category: .unknownOrigin, reason: nil, appId: nil)
        #expect(t.routes["r"]?.mode == "enforce")
        #expect(t.routes["r"]?.categories == [4, 0, 2, 2, 0])
        #expect(t.routes["r"]?.reasons == ["expired": 2])
        #expect(t.routes["r"]?.apps == ["app1": [4, 0, 0, 0, 0]])
        #expect(t.routes["s"]?.apps == ["app1": [1, 0, 0, 0, 0]])
        var other = DashboardTally()
        other.record(route: "r", mode: "enforce", category: .verified, reason: nil, appId: "app2")
        t.add(other)
        t.record(route: "r", mode: "enforce", category: .verified, reason: nil, appId: "app2")
        #expect(t.routes["r"]?.apps == ["app1": [4, 0, 0, 0, 0], "app2": [2, 0, 0, 0, 0]])
        // Against counting one by one (the rule `record` follows, written out here): a long mixed sequence that
        // fills the route's App IDs past the cap, compared after every request.
        var runs = DashboardTally()
        var categories = [Int](repeating: 0, count: DashboardHistory.categories.count)
        var byApp: [String: [Int]] = [:]
        let tail: [String?] = ["a", "a", "b", "a", nil, "c", "c", "c"]
        for i in 0..<(3 * DashboardTally.maxAppsPerRoute) {
            let appId = i < 2 * DashboardTally.maxAppsPerRoute ? "app-\(i / 3)" : tail[i % tail.count]
            let outcome = i % 7 == 0 ? "invalid" : "verified"
            runs.record(route: "r", mode: "enforce", category: outcome == "invalid" ? .invalid : .verified,
                        reason: outcome == "invalid" ? "bad_signature" : nil,
                        appId: appId)
            let c = DashboardHistory.categoryIndex(outcome)!
            categories[c] += 1
            if let appId {
                let key = byApp.count < DashboardTally.maxAppsPerRoute || byApp[appId] != nil ? appId : DashboardHistory.other
                byApp[key, default: [Int](repeating: 0, count: categories.count)][c] += 1
            }
            #expect(runs.routes["r"]?.categories == categories, "request \(i)")
            #expect(runs.routes["r"]?.apps == byApp, "request \(i)")
        }
    }

    @Test func minuteBucketsAndWindows() throws {
        var clock = ManualClock()
        var h = DashboardHistory()
        h.fold(Self.tally(["verified": 5, "invalid": 1], reason: "bad_signature"), now: clock.now)
        clock.advance(minutes: 0.5) // same minute
        h.fold(Self.tally(["verified": 2]), now: clock.now)
        clock.advance(minutes: 90) // 1.5 h later
        h.fold(Self.tally(["outdated_client": 3], reason: "missing"), now: clock.now)

        let hour = try #require(h.stats(route: "api", window: .hour, now: clock.now))
        #expect(hour.counts == [0, 3, 0, 0, 0])
        #expect(hour.series.count == 60)
        #expect(hour.series.last?.counts == [0, 3, 0, 0, 0])
        #expect(hour.series.last?.minute == DashboardHistory.minute(clock.now))
        #expect(hour.reasons.map(\.name) == ["missing"])

        let day = try #require(h.stats(route: "api", window: .day, now: clock.now))
        #expect(day.counts == [7, 3, 0, 1, 0])
        #expect(day.total == 11)
        #expect(day.series.count == 96)
        #expect(day.series.reduce(0) { $0 + $1.counts.reduce(0, +) } == 11)
        #expect(day.reasons.map(\.name) == ["missing", "bad_signature"])
        #expect(day.reasons.map(\.count) == [3, 1])

        // A week and a minute later, everything has aged out; the ring has wrapped.
        clock.advance(minutes: Double(DashboardHistory.weekMinutes))
        let week = try #require(h.stats(route: "api", window: .week, now: clock.now))
        #expect(week.counts == [0, 0, 0, 0, 0])
        #expect(week.series.count == 84)
        #expect(week.reasons.isEmpty && week.apps.isEmpty)
    }

    @Test func weekWindowKeepsSixDaysAgoAndDropsEightDaysAgo() throws {
        var clock = ManualClock()
        var h = DashboardHistory()
        h.fold(Self.tally(["verified": 4]), now: clock.now)
        clock.advance(minutes: 2 * 24 * 60)
        h.fold(Self.tally(["invalid": 1], reason: "expired"), now: clock.now)
        clock.advance(minutes: 6 * 24 * 60) // first fold is now 8 days old
        h.fold(Self.tally(["verified": 1]), now: clock.now)
        let week = try #require(h.stats(route: "api", window: .week, now: clock.now))
        #expect(week.counts == [1, 0, 0, 1, 0])
        // An old minute arriving late (a restart with an old file) is dropped, not written over a new bucket.
        h.fold(Self.tally(["reused": 9]), now: clock.now - 8 * 86400)
        #expect(h.stats(route: "api", window: .week, now: clock.now)?.counts == [1, 0, 0, 1, 0])
    }

    @Test func appIdsBeyondTheLimitCountAsOtherAndSlotsAreReusedAfterAWeek() throws {
        var clock = ManualClock()
        var h = DashboardHistory()
        for i in 0..<(DashboardHistory.maxApps + 3) {
            h.fold(Self.tally(["verified": i + 1], appId: "app-\(i)"), now: clock.now)
        }
        let day = try #require(h.stats(route: "api", window: .day, now: clock.now))
        #expect(day.apps.count == DashboardHistory.maxApps + 1)
        let other = try #require(day.apps.first { $0.name == DashboardHistory.other })
        #expect(other.counts[0] == 21 + 22 + 23)
        #expect(day.apps.first?.name == other.name) // the largest total first
        clock.advance(minutes: Double(DashboardHistory.weekMinutes + 60))
        h.fold(Self.tally(["verified": 1], appId: "newcomer"), now: clock.now)
        let later = try #require(h.stats(route: "api", window: .hour, now: clock.now))
        #expect(later.apps.map(\.name) == ["newcomer"])
    }

    @Test func routesBeyondTheLimitEvictTheLeastRecentlyActive() {
        var clock = ManualClock()
        var h = DashboardHistory()
        for i in 0..<DashboardHistory.maxRoutes {
            h.fold(Self.tally(["verified": 1], route: "route-\(i)"), now: clock.now)
            clock.advance(minutes: 1)
        }
        h.fold(Self.tally(["verified": 1], route: "route-0"), now: clock.now) // route-1 is now the stalest
        h.fold(Self.tally(["verified": 1], route: "late"), now: clock.now)
        #expect(h.routes.count == DashboardHistory.maxRoutes)
        #expect(h.routes["route-1"] == nil)
        #expect(h.routes["route-0"] != nil && h.routes["late"] != nil)
    }

    @Test(arguments: [
        // (verified, outdated, unknown, invalid, reused), expected
        ([999, 0, 0, 0, 0], DashboardVerdict.Kind.notEnoughTraffic),
        ([990, 0, 0, 0, 0], .notEnoughTraffic),
        ([1000, 0, 0, 0, 0], .ready),
        ([990, 0, 0, 10, 0], .ready),            // exactly 99% verified, 1% invalid (not above 1%)
        ([989, 0, 0, 11, 0], .investigate),      // invalid above 1%
        ([980, 0, 6, 5, 9], .investigate),        // unknown + invalid = 1.1%
        ([970, 20, 11, 0, 0], .investigate),      // both: investigate first
        ([970, 30, 0, 0, 0], .wait),              // outdated clients above 1%
        ([985, 5, 5, 5, 0], .wait),               // below ready_share, no single cause above 1%
        ([980, 0, 0, 0, 20], .wait),              // reused tokens keep it below the bar
    ])
    func verdicts(counts: [Int], expected: DashboardVerdict.Kind) {
        let v = DashboardVerdict(counts: counts, minRequests: 1000, readyShare: 0.99)
        #expect(v.kind == expected, "\(counts): \(v.because)")
        #expect(v.total == counts.reduce(0, +))
    }

    @Test func verdictSaysWhy() {
        let v = DashboardVerdict(counts: [9900, 0, 0, 100, 0], minRequests: 1000, readyShare: 0.99)
        #expect(v.kind == .ready)
        #expect(v.because == "verified 99.00% ≥ ready_share 99.00% of 10000 requests")
        #expect(DashboardVerdict.percent(0.00125) == "0.13%")
        #expect(DashboardVerdict(counts: [0, 0, 0, 0, 0], minRequests: 0, readyShare: 0.99).kind == .wait)
    }

    /// A heavy replay share (issue 39, docs/dashboard.md "Alerts"): still `wait` by the documented rules, with the
    /// reuse named and `alert` set, like `investigate`; a ready route and too little traffic raise none.
    @Test func aHeavyReplayShareRaisesAnAlert() {
        let replayed = DashboardVerdict(counts: [2, 0, 0, 0, 5], minRequests: 5, readyShare: 0.99)
        #expect(replayed.kind == .wait && replayed.alert)
        #expect(replayed.because == "reused 71.43% > 1% of 7 requests: replayed tokens, or clients resending limited-use tokens")
        // A lower ready_share would call it ready; the reuse comes first.
        #expect(DashboardVerdict(counts: [95, 0, 0, 0, 5], minRequests: 5, readyShare: 0.9).kind == .wait)
        #expect(DashboardVerdict(counts: [6, 0, 1, 0, 0], minRequests: 5, readyShare: 0.99).alert)
        #expect(!DashboardVerdict(counts: [99, 0, 0, 0, 1], minRequests: 5, readyShare: 0.99).alert)
        #expect(!DashboardVerdict(counts: [1, 0, 0, 0, 3], minRequests: 5, readyShare: 0.99).alert, "not enough traffic")
    }

    /// "1 request", never "1 requests" (issue 26); other counts stay plural.
    @Test func verdictCountsOneRequestInTheSingular() {
        #expect(DashboardVerdict(counts: [1, 0, 0, 0, 0], minRequests: 5, readyShare: 0.99).because
                == "1 request, fewer than min_requests 5")
        #expect(DashboardVerdict(counts: [0, 0, 0, 0, 0], minRequests: 5, readyShare: 0.99).because
                == "0 requests, fewer than min_requests 5")
        #expect(DashboardVerdict(counts: [1, 0, 0, 0, 0], minRequests: 1, readyShare: 0.99).because
                == "verified 100.00% ≥ ready_share 99.00% of 1 request")
        #expect(DashboardVerdict(counts: [0, 0, 1, 0, 0], minRequests: 1, readyShare: 0.99).because
                == "invalid + unknown origin 100.00% > 1% of 1 request")
        #expect(DashboardVerdict.requests(2) == "2 requests")
    }

    /// Fills every route, App ID and reason slot with over-long names, then checks the counters' size
    /// (every ring's array plus every stored name) against `boundBytes`, and the bound against "a few MiB".
    @Test func memoryStaysWithinTheStatedBound() {
        #expect(DashboardHistory.boundBytes <= 11 * 1024 * 1024, "\(DashboardHistory.boundBytes)")
        let rssBefore = Self.residentBytes()
        var clock = ManualClock()
        var h = DashboardHistory()
        let long = String(repeating: "x", count: 300)
        for minute in 0..<3 {
            var t = DashboardTally()
            for r in 0..<(DashboardHistory.maxRoutes + 5) {
                for a in 0..<(DashboardHistory.maxApps + 5) {
                    t.record(route: "route-\(r)-\(long)", mode: "enforce", category: .invalid,
                             reason: "reason-\(a)-\(minute)-\(long)", appId: "app-\(a)-\(minute)-\(long)")
                }
            }
            h.fold(t, now: clock.now)
            clock.advance(minutes: 1)
        }
        #expect(h.routes.count == DashboardHistory.maxRoutes)
        #expect(h.storageBytes <= DashboardHistory.boundBytes, "\(h.storageBytes) > \(DashboardHistory.boundBytes)")
        #expect(h.routes.values.contains { $0.apps.count == DashboardHistory.maxApps && $0.reasons.count == DashboardHistory.maxReasons })
        // For the record (not asserted: other tests share the process): resident memory growth while filling.
        print("dashboard history: storage \(h.storageBytes) bytes when full, bound \(DashboardHistory.boundBytes) bytes, RSS grew \(Self.residentBytes() - rssBefore) bytes")
    }

    /// VmRSS of this process, from /proc/self/status.
    static func residentBytes() -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    @Test func historyFileRoundTripAndRefusals() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("dash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("history.json").path
        guard case .absent = DashboardHistoryFile.load(path: path) else { Issue.record("expected absent"); return }

        let clock = ManualClock()
        var h = DashboardHistory()
        h.fold(Self.tally(["verified": 7, "invalid": 2], reason: "expired", appId: "1:1:ios:a"), now: clock.now)
        h.fold(Self.tally(["unknown_origin": 1], route: "other-route", mode: "enforce", reason: "missing"), now: clock.now)
        try DashboardHistoryFile.save(h, path: path)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["history.json"]) // no temp left
        guard case .loaded(let back) = DashboardHistoryFile.load(path: path) else { Issue.record("not loaded"); return }
        for route in ["api", "other-route"] {
            for w in DashboardHistory.Window.all {
                #expect(back.stats(route: route, window: w, now: clock.now) == h.stats(route: route, window: w, now: clock.now))
            }
        }
        #expect(back.routes["other-route"]?.mode == "enforce")

        for (content, fragment) in [("{not json", "not a dashboard history file"),
                                    (#"{"format":"something else","version":1,"routes":{}}"#, "format 'something else'"),
                                    (#"{"hello":"world"}"#, "missing key")] {
            try content.write(toFile: path, atomically: true, encoding: .utf8)
            guard case .refused(let why) = DashboardHistoryFile.load(path: path) else { Issue.record("accepted \(content)"); continue }
            #expect(why.contains(fragment), "\(why)")
        }
        // A file whose rings have another shape (another build's limits) is refused, not indexed out of range.
        var text = String(decoding: try JSONEncoder().encode(h), as: UTF8.self)
        text = text.replacingOccurrences(of: #""count":60"#, with: #""count":61"#)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        guard case .refused = DashboardHistoryFile.load(path: path) else { Issue.record("accepted a wrong shape"); return }
    }
}
