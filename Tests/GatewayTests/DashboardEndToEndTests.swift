@testable import Dashboard
import Foundation
@testable import Gateway
import TestSupport
import Testing

/// The dashboard end to end (docs/dashboard.md): traffic of known categories through a real gateway, then the admin
/// listener's `/dashboard.json` and `/dashboard` say exactly that.
@Suite struct DashboardEndToEndTests {
    static let appA = "1:123456789012:ios:aaaa"
    static let appB = "1:123456789012:android:bbbb"
    static let routes = """
      - name: redeem
        path: /redeem
        upstream: api
        enforcement: enforce
        replay_protection: true
      - name: ready
        prefix: /ready/
        upstream: api
        enforcement: monitor
      - name: watched
        prefix: /watched/
        upstream: api
        enforcement: monitor
      - name: locked
        prefix: /locked/
        upstream: api
        enforcement: enforce
      - name: open
        prefix: /open/
        upstream: api
        enforcement: off
    """

    /// What the traffic below sends, per route: counts by category (verified, outdated, unknown, invalid, reused).
    static let expected: [String: [Int]] = [
        "redeem": [1, 0, 0, 0, 1],
        "ready": [6, 0, 0, 0, 0],
        "watched": [5, 2, 0, 0, 0],
        "locked": [3, 0, 1, 2, 0],
        "open": [0, 0, 0, 0, 0],
    ]
    static let expectedVerdicts = [
        "redeem": "not enough traffic", "ready": "ready to enforce", "watched": "wait", "locked": "investigate",
        "open": "not enough traffic",
    ]

    /// A running gateway (min_requests 5) with the traffic of `expected` sent through it.
    static func gatewayWithTraffic(_ issuer: LocalIssuer, extraTop: String = "") throws -> GatewayHarness {
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: routes, appCheck: """
              project_id: "demo-project"
              jwks:
                url: \(issuer.jwksURL)
              clock_skew: 0s
              outdated_client:
                header: User-Agent
                pattern: "^OldApp/"
            """, top: """
            dashboard:
              min_requests: 5
              ready_share: 0.99
            \(extraTop)
            """)
        }
        try h.waitUntilReady()
        let a = try issuer.mint(appId: appA), b = try issuer.mint(appId: appB)
        func send(_ method: String, _ path: String, token: String? = nil, ua: String? = nil) throws -> Int {
            var head = "\(method) \(path) HTTP/1.1\r\nHost: api\r\n"
            if let token { head += "X-Firebase-AppCheck: \(token)\r\n" }
            if let ua { head += "User-Agent: \(ua)\r\n" }
            return try RawHTTPClient.roundTrip(port: h.port, head + "Content-Length: 0\r\n\r\n").status
        }
        // The memory store refuses limited-use tokens minted before it came up (replay state loss, clock_skew 0s):
        // mint this one in the next whole second.
        ReplayE2E.waitForNextSecond()
        let limited = try issuer.mint(appId: appA, ttl: 300, jti: UUID().uuidString)
        #expect(try send("POST", "/redeem", token: limited) == 200)
        #expect(try send("POST", "/redeem", token: limited) == 401)
        for _ in 0..<6 { #expect(try send("GET", "/ready/x", token: a) == 200) }
        for _ in 0..<5 { #expect(try send("GET", "/watched/x", token: b) == 200) }
        for _ in 0..<2 { #expect(try send("GET", "/watched/x", ua: "OldApp/1.0") == 200) }
        for _ in 0..<3 { #expect(try send("GET", "/locked/x", token: a) == 200) }
        #expect(try send("GET", "/locked/x") == 401)
        for _ in 0..<2 { #expect(try send("GET", "/locked/x", token: "not-a-token") == 401) }
        for _ in 0..<2 { #expect(try send("GET", "/open/x") == 200) }
        return h
    }

    static func admin(_ h: GatewayHarness, _ path: String) throws -> TestResponse {
        try RawHTTPClient.roundTrip(port: h.adminPort, "GET \(path) HTTP/1.1\r\nHost: admin\r\n\r\n")
    }

    static func dashboardJSON(_ h: GatewayHarness) throws -> [String: Any] {
        let r = try admin(h, "/dashboard.json")
        #expect(r.status == 200)
        #expect(r.header("Content-Type") == "application/json")
        #expect(r.header("Cache-Control") == "no-store")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
    }

    @Test func jsonNumbersEqualWhatWasSent() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.gatewayWithTraffic(issuer)
        defer { h.stop() }
        let json = try Self.dashboardJSON(h)
        let categories = try #require(json["categories"] as? [String])
        #expect(categories == ["verified", "outdated_client", "unknown_origin", "invalid", "reused"])
        let routes = try #require(json["routes"] as? [[String: Any]])
        #expect(routes.compactMap { $0["name"] as? String } == ["redeem", "ready", "watched", "locked", "open"])
        for route in routes {
            let name = try #require(route["name"] as? String)
            let windows = try #require(route["windows"] as? [String: [String: Any]])
            for window in ["hour", "day", "week"] {
                let w = try #require(windows[window])
                let counts = try #require(w["counts"] as? [String: Int])
                #expect(categories.map { counts[$0] ?? -1 } == Self.expected[name], "\(name) \(window)")
                #expect(w["total"] as? Int == Self.expected[name]?.reduce(0, +))
                let verdict = try #require(w["verdict"] as? [String: Any])
                #expect(verdict["verdict"] as? String == Self.expectedVerdicts[name], "\(name): \(verdict)")
                let series = try #require(w["series"] as? [String: Any])
                let points = try #require(series["points"] as? [[Int]])
                let sum = points.reduce([0, 0, 0, 0, 0]) { acc, p in zip(acc, p).map { $0 + $1 } }
                if name != "open" { #expect(sum == Self.expected[name], "\(name) \(window) series") }
                #expect(points.count == ["hour": 60, "day": 96, "week": 84][window], "\(name) \(window): every route's series spans its window")
            }
        }
        let mode = Dictionary(uniqueKeysWithValues: routes.map { ($0["name"] as? String ?? "", $0["mode"] as? String ?? "") })
        #expect(mode == ["redeem": "enforce", "ready": "monitor", "watched": "monitor", "locked": "enforce", "open": "off"])

        func hour(_ name: String) throws -> [String: Any] {
            let r = try #require(routes.first { $0["name"] as? String == name })
            return try #require((r["windows"] as? [String: [String: Any]])?["hour"])
        }
        let locked = try hour("locked")
        let reasons = try #require(locked["reasons"] as? [[String: Any]])
        #expect(reasons.map { $0["reason"] as? String ?? "" } == ["malformed", "missing"])
        #expect(reasons.map { $0["count"] as? Int ?? 0 } == [2, 1])
        let apps = try #require(locked["app_ids"] as? [[String: Any]])
        #expect(apps.map { $0["app_id"] as? String ?? "" } == [Self.appA])
        #expect(apps.first?["total"] as? Int == 3)
        let watchedApps = try #require(try hour("watched")["app_ids"] as? [[String: Any]])
        #expect(watchedApps.map { $0["app_id"] as? String ?? "" } == [Self.appB])
        let redeemReasons = try #require(try hour("redeem")["reasons"] as? [[String: Any]])
        #expect(redeemReasons.map { $0["reason"] as? String ?? "" } == ["reused"])
        let because = try #require((try hour("watched")["verdict"] as? [String: Any])?["because"] as? String)
        #expect(because == "outdated clients 28.57% > 1% of 7 requests")

        let keySet = try #require(json["key_set"] as? [String: Any])
        #expect(keySet["status"] as? String == "ok")
        #expect(keySet["keys"] as? Int == 1)
        #expect(keySet["last_fetch"] as? String == "ok")
        let replay = try #require(json["replay_store"] as? [String: Any])
        #expect(replay["store"] as? String == "memory")
        #expect(replay["consumed"] as? Int == 1 && replay["reused"] as? Int == 1 && replay["errors"] as? Int == 0)
        let issuerBlock = try #require(json["issuer"] as? [String: Any])
        #expect(issuerBlock["status"] as? String == "not configured")
        let settings = try #require(json["settings"] as? [String: Any])
        #expect(settings["min_requests"] as? Int == 5)

        // A second read sees the same (folding twice does not double-count).
        let again = try Self.dashboardJSON(h)
        let lockedAgain = (again["routes"] as? [[String: Any]])?.first { $0["name"] as? String == "locked" }
        #expect(((lockedAgain?["windows"] as? [String: [String: Any]])?["week"]?["total"] as? Int) == 6)
    }

    @Test func pageIsSelfContainedWithItsDataAndOnlyOnTheAdminListener() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try Self.gatewayWithTraffic(issuer)
        defer { h.stop() }
        let r = try Self.admin(h, "/dashboard")
        #expect(r.status == 200)
        #expect(r.header("Content-Type") == "text/html; charset=utf-8")
        #expect(r.header("Cache-Control") == "no-store")
        let csp = try #require(r.header("Content-Security-Policy"))
        #expect(csp.hasPrefix("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'"))
        let page = r.bodyText
        #expect(page.contains(#""name":"locked""#))
        #expect(!page.contains("__DASHBOARD_JSON__"))
        // Nothing from elsewhere: outside the embedded data, no absolute URL but the SVG namespace, no src, no link.
        let parts = page.components(separatedBy: #"<script id="dashboard-data" type="application/json">"#)
        #expect(parts.count == 2)
        let code = (parts.first ?? "") + (parts.last?.components(separatedBy: "</script>").dropFirst().joined() ?? "")
        let urls = code.components(separatedBy: "http").dropFirst().map { "http" + $0.prefix(40) }
        #expect(urls.allSatisfy { $0.hasPrefix("http://www.w3.org/2000/svg") }, "\(urls)")
        #expect(!code.contains("src=") && !code.contains("<link") && !code.contains("@import") && !code.contains("url("))
        for path in ["/dashboard", "/dashboard.json"] {
            let pub = try RawHTTPClient.roundTrip(port: h.port, "GET \(path) HTTP/1.1\r\nHost: api\r\n\r\n")
            #expect(pub.status == 404, "public \(path)")
        }
    }

    static func weekTotal(_ json: [String: Any], _ route: String) -> Int? {
        let r = (json["routes"] as? [[String: Any]])?.first { $0["name"] as? String == route }
        return (r?["windows"] as? [String: [String: Any]])?["week"]?["total"] as? Int
    }

    /// `dashboard.history_file`: written at shutdown (and every minute), read at the next start; a corrupt file
    /// is an error log line and an empty start, never a crash.
    @Test func historySurvivesARestartAndACorruptFileStartsEmpty() throws {
        let dir = NSTemporaryDirectory() + "dashboard-e2e-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/history.json"
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let top = "  history_file: \(file)"
        let first = try Self.gatewayWithTraffic(issuer, extraTop: top)
        first.stop() // folds the loops' last counts and writes the file
        #expect(FileManager.default.fileExists(atPath: file))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["history.json"])

        let second = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: Self.routes, appCheck: "  jwks:\n    url: \(issuer.jwksURL)",
                                  top: "dashboard:\n\(top)")
        }
        let json = try Self.dashboardJSON(second)
        second.stop()
        for (name, counts) in Self.expected { #expect(Self.weekTotal(json, name) == counts.reduce(0, +), "\(name)") }
        #expect(second.logLines().contains { $0.contains("dashboard history loaded") })

        try "{\"format\":\"something else\"".write(toFile: file, atomically: true, encoding: .utf8)
        let third = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: Self.routes, appCheck: "  jwks:\n    url: \(issuer.jwksURL)",
                                  top: "dashboard:\n\(top)")
        }
        let empty = try Self.dashboardJSON(third)
        third.stop()
        for name in Self.expected.keys { #expect(Self.weekTotal(empty, name) == 0, "\(name)") }
        let line = third.logLines().first { $0.contains("dashboard history file ignored") }
        #expect(line?.contains(#""severity":"ERROR""#) == true, "\(third.logLines())")
        #expect(line?.contains("not a dashboard history file") == true, "\(line ?? "")")
        // The bad file was replaced by a good (empty) one at shutdown.
        guard case .loaded = DashboardHistoryFile.load(path: file) else { Issue.record("not rewritten"); return }
    }
}
