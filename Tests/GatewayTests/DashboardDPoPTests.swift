import AppCheck
@testable import Dashboard
import Foundation
import Testing
import TestSupport

/// The DPoP bound share on the dashboard (docs/dpop.md "Rollout", docs/dashboard.md): per route, of the verified
/// requests those with a key-bound token and its proof; with the issuer, of the minted tokens the bound ones. The
/// history's windows by a manual clock, then a real gateway with its own issuer: real exchanges with and without a
/// proof, real requests with bound and bearer tokens, read back from `/dashboard.json`, `/metrics` and the page as
/// headless Chromium renders it.
@Suite(.serialized) struct DashboardDPoPTests {
    typealias Clock = DashboardHistoryTests.ManualClock

    static func tally(route: String = "api", verified: Int, bound: Int) -> DashboardTally {
        var t = DashboardTally()
        for i in 0..<verified {
            t.record(route: route, mode: "enforce", category: .verified, reason: nil, appId: "app", bound: i < bound)
        }
        return t
    }

    static func pair(_ s: DashboardHistory.WindowStats?) -> [Int] { [s?.boundVerified ?? -1, s?.bound ?? -1] }

    @Test func tallyCountsOnlyVerifiedRequestsAsBoundAndRunsKeepTheirCount() {
        var t = DashboardTally()
        // A run of bound requests, then unbound ones with the same route and App ID: two runs, not one.
        for _ in 0..<3 { t.record(route: "r", mode: "enforce", category: .verified, reason: nil, appId: "a", bound: true) }
        for _ in 0..<2 { t.record(route: "r", mode: "enforce", category: .verified, reason: nil, appId: "a", bound: false) }
        t.record(route: "r", mode: "enforce", category: .invalid, reason: "dpop_invalid", appId: "a", bound: true)
        #expect(t.routes["r"]?.bound == 3)
        #expect(t.routes["r"]?.categories == [5, 0, 0, 1, 0])
        var sum = DashboardTally()
        sum.add(t)
        sum.add(Self.tally(route: "r", verified: 4, bound: 1))
        #expect(sum.routes["r"]?.bound == 4)
    }

    /// The share follows the App IDs' rules: the hour to the minute, the day and week in whole clock hours; both of
    /// its counts age out together.
    @Test func boundShareWindowsAgeLikeAppIDs() {
        var clock = Clock()
        var h = DashboardHistory()
        h.fold(Self.tally(verified: 10, bound: 4), now: clock.now)
        clock.advance(minutes: 30)
        h.fold(Self.tally(verified: 10, bound: 1), now: clock.now)
        #expect(Self.pair(h.stats(route: "api", window: .hour, now: clock.now)) == [20, 5])
        clock.advance(minutes: 31)       // the first fold left the hour window, not the day's clock hours
        #expect(Self.pair(h.stats(route: "api", window: .hour, now: clock.now)) == [10, 1])
        #expect(Self.pair(h.stats(route: "api", window: .day, now: clock.now)) == [20, 5])
        clock.advance(minutes: 24 * 60)
        #expect(Self.pair(h.stats(route: "api", window: .day, now: clock.now)) == [0, 0])
        #expect(Self.pair(h.stats(route: "api", window: .week, now: clock.now)) == [20, 5])
        clock.advance(minutes: 7 * 24 * 60)
        #expect(Self.pair(h.stats(route: "api", window: .week, now: clock.now)) == [0, 0])
    }

    /// The bound rings are kept in the history file; a file written before them loads, and the share then counts
    /// from the next fold on (both of its counts, so it is never skewed).
    @Test func historyFileKeepsTheBoundCountsAndOlderFilesLoad() throws {
        let clock = Clock()
        var h = DashboardHistory()
        h.fold(Self.tally(verified: 6, bound: 2), now: clock.now)
        let path = NSTemporaryDirectory() + "dashboard-dpop-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try DashboardHistoryFile.save(h, path: path)
        guard case .loaded(let back) = DashboardHistoryFile.load(path: path) else { Issue.record("not loaded"); return }
        #expect(Self.pair(back.stats(route: "api", window: .week, now: clock.now)) == [6, 2])

        // The same file as an older build wrote it: no bound rings.
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var routes = try #require(object["routes"] as? [String: Any])
        var api = try #require(routes["api"] as? [String: Any])
        #expect(api["boundMinutes"] != nil && api["boundHours"] != nil)
        api["boundMinutes"] = nil
        api["boundHours"] = nil
        routes["api"] = api
        object["routes"] = routes
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        guard case .loaded(var old) = DashboardHistoryFile.load(path: path) else { Issue.record("older file refused"); return }
        #expect(old.stats(route: "api", window: .hour, now: clock.now)?.counts == [6, 0, 0, 0, 0])
        #expect(Self.pair(old.stats(route: "api", window: .hour, now: clock.now)) == [0, 0])
        old.fold(Self.tally(verified: 3, bound: 3), now: clock.now)
        #expect(Self.pair(old.stats(route: "api", window: .hour, now: clock.now)) == [3, 3])
        #expect(old.storageBytes <= DashboardHistory.boundBytes)
    }

    static func proof(_ key: DPoPPrivateKey, htm: String, htu: String, token: String? = nil) throws -> String {
        try #require(key.proof(htm: htm, htu: htu, iat: Date().timeIntervalSince1970, jti: UUID().uuidString,
                               accessToken: token))
    }

    /// Through a real gateway (IssuerDPoPTests' rig: route `orders` with `dpop: optional`, `strict` with `required`,
    /// and the issuer): 3 exchanges, 2 of them with a proof; on `orders` 3 bound requests with proofs, 2 with a
    /// bearer token and 1 bound token without its proof (refused, so not verified); on `strict` 2 bound requests and
    /// one bearer token (refused `dpop_unbound`).
    @Test func realTrafficShowsTheBoundSharesInJSONMetricsAndPage() throws {
        let rig = try IssuerDPoPTests.Rig()
        defer { rig.stop() }
        let app = IssuerDPoPTests.open
        let key = try #require(DPoPPrivateKey.generate())
        let exchangeURL = "http://gw" + IssuerDPoPTests.path(app)
        var token = ""
        for _ in 0..<2 {
            let r = try rig.exchange(app, proof: try Self.proof(key, htm: "POST", htu: exchangeURL))
            #expect(r.status == 200, "\(r.bodyText)")
            token = try IssuerEndToEndTests.token(r)
        }
        #expect(try IssuerDPoPTests.jkt(token) == key.thumbprint)
        let plain = try rig.exchange(app, proof: nil)
        #expect(plain.status == 200, "\(plain.bodyText)")
        let bearer = try IssuerEndToEndTests.token(plain)

        for _ in 0..<3 {
            let r = try rig.call("/api/x", token: token, proof: try Self.proof(key, htm: "GET", htu: "http://gw/api/x", token: token))
            #expect(r.status == 200, "\(r.bodyText)")
        }
        for _ in 0..<2 { #expect(try rig.call("/api/x", token: bearer, proof: nil).status == 200) }
        #expect(try rig.call("/api/x", token: token, proof: nil).status == 401)
        for _ in 0..<2 {
            let r = try rig.call("/strict/x", token: token, proof: try Self.proof(key, htm: "GET", htu: "http://gw/strict/x", token: token))
            #expect(r.status == 200, "\(r.bodyText)")
        }
        #expect(try rig.call("/strict/x", token: bearer, proof: nil).status == 401)

        let r = try RawHTTPClient.roundTrip(port: rig.gateway.adminPort, "GET /dashboard.json HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(r.status == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
        let routes = try #require(json["routes"] as? [[String: Any]])
        let expected: [String: (dpop: String, verified: Int, bound: Int, share: Double)] = [
            "orders": ("optional", 5, 3, 0.6), "strict": ("required", 2, 2, 1),
        ]
        #expect(routes.compactMap { $0["name"] as? String } == ["orders", "strict"])
        for route in routes {
            let name = try #require(route["name"] as? String)
            let want = try #require(expected[name])
            #expect(route["dpop"] as? String == want.dpop)
            let windows = try #require(route["windows"] as? [String: [String: Any]])
            for window in ["hour", "day", "week"] {
                let d = try #require(windows[window]?["dpop"] as? [String: Any], "\(name) \(window)")
                #expect(d["verified"] as? Int == want.verified, "\(name) \(window) \(d)")
                #expect(d["bound"] as? Int == want.bound, "\(name) \(window) \(d)")
                #expect(d["bound_share"] as? Double == want.share, "\(name) \(window) \(d)")
                #expect((windows[window]?["counts"] as? [String: Int])?["verified"] == want.verified)
            }
        }
        let issuer = try #require(json["issuer"] as? [String: Any])
        let bound = try #require(issuer["bound"] as? [String: [String: Any]])
        for window in ["hour", "day", "week"] {
            let b = try #require(bound[window])
            #expect(b["minted"] as? Int == 3 && b["bound"] as? Int == 2, "\(window) \(b)")
            #expect(b["bound_share"] as? Double == 0.666667, "\(window) \(b)")
        }
        let exchanges = try #require(issuer["exchanges"] as? [[String: Any]])
        let minted = try #require(exchanges.first { $0["result"] as? String == "minted" && $0["app_id"] as? String == app })
        #expect(minted["bound"] as? [String: Int] == ["hour": 2, "day": 2, "week": 2, "total": 2], "\(minted)")
        #expect(exchanges.allSatisfy { ($0["bound"] != nil) == ($0["result"] as? String == "minted") }, "\(exchanges)")

        let metrics = try RawHTTPClient.roundTrip(port: rig.gateway.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains("appcheck_dpop_bound_requests_total{route=\"orders\",mode=\"enforce\"} 3"), "\(metrics)")
        #expect(metrics.contains("appcheck_dpop_bound_requests_total{route=\"strict\",mode=\"enforce\"} 2"))
        #expect(metrics.contains("appcheck_issuer_bound_tokens_total{app_id=\"\(app)\",method=\"exchangeDebugToken\"} 2"))

        // The page as a browser renders it: the table's column, the card's line, the issuer's.
        let profile = NSTemporaryDirectory() + "dashboard-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let dump = try BoundedCommand.run(DashboardBrowserTests.chromium, DashboardBrowserTests.flags(profile: profile) + [
            "--virtual-time-budget=3000", "--dump-dom", "http://127.0.0.1:\(rig.gateway.adminPort)/dashboard#hour"], timeout: 90)
        #expect(dump.status == 0, "\(dump.stderr)")
        let dom = dump.stdout
        let row = try #require(DashboardBrowserTests.row(dom, "orders"), "no orders row")
        #expect(row.contains(#"<td class="bound">3<span class="share">60.00% of verified</span></td>"#), "\(row)")
        let strictRow = try #require(DashboardBrowserTests.row(dom, "strict"), "no strict row")
        #expect(strictRow.contains(#"<td class="bound">2<span class="share">100.00% of verified</span></td>"#), "\(strictRow)")
        let card = try #require(DashboardBrowserTests.slice(dom, from: #"<section class="route" id="route-orders""#, to: "</section>"))
        #expect(card.contains(#"<p class="dpop"><b>Bound tokens (DPoP)</b>: 3 of 5 verified requests (60.00%)<span class="muted"> · dpop: optional</span></p>"#),
                "\(card)")
        let issuerLine = try #require(DashboardBrowserTests.slice(dom, from: #"<div id="issuer">"#, to: "</div>"))
        #expect(issuerLine.contains(#"<span class="issuer-bound"> · bound 2 of 3 minted (66.67%)</span>"#), "\(issuerLine)")
    }
}
