import Foundation
import Testing
import TestSupport

/// The dashboard page in a real browser (Debian's `chromium`, headless): after its scripts run, the DOM shows
/// every route with its verdict and counts; screenshots land in `.build/dashboard-test/`; and the browser's
/// network log shows no request to any host but the gateway's admin listener.
@Suite(.serialized) struct DashboardBrowserTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let chromium = "/usr/bin/chromium"

    /// Flags for a quiet, isolated headless run: no sandbox (tests may run as root), no background services,
    /// and every host name but 127.0.0.1 unresolvable, so a stray external reference fails instead of leaking.
    static func flags(profile: String) -> [String] {
        ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--user-data-dir=\(profile)",
         "--no-first-run", "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
         "--disable-default-apps", "--disable-extensions", "--disable-sync", "--disable-domain-reliability",
         "--metrics-recording-only", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--hide-scrollbars"]
    }

    /// The requests a net log shows starting (`URL_REQUEST_START_JOB`): URL, initiator, isolation key.
    static func requests(in log: Any) -> [(url: String, initiator: String, isolation: String)] {
        guard let root = log as? [String: Any], let constants = root["constants"] as? [String: Any],
              let types = constants["logEventTypes"] as? [String: Int], let start = types["URL_REQUEST_START_JOB"],
              let events = root["events"] as? [[String: Any]] else { return [] }
        return events.compactMap { e in
            guard e["type"] as? Int == start, let p = e["params"] as? [String: Any], let url = p["url"] as? String else { return nil }
            return (url, p["initiator"] as? String ?? "", p["network_isolation_key"] as? String ?? "")
        }
    }

    /// The `<tr data-route="name">…</tr>` of the dumped DOM.
    static func row(_ dom: String, _ name: String) -> String? {
        guard let start = dom.range(of: #"<tr data-route="\#(name)">"#) else { return nil }
        guard let end = dom[start.upperBound...].range(of: "</tr>") else { return nil }
        return String(dom[start.lowerBound..<end.upperBound])
    }

    @Test func pageRendersEveryRouteVerdictAndCountAndFetchesNothingElsewhere() throws {
        #expect(FileManager.default.isExecutableFile(atPath: Self.chromium), "chromium is missing: make test installs it (Makefile TEST_PACKAGES)")
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try DashboardEndToEndTests.gatewayWithTraffic(issuer)
        defer { h.stop() }
        let out = Self.repoRoot.appendingPathComponent(".build/dashboard-test")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let profile = NSTemporaryDirectory() + "dashboard-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let url = "http://127.0.0.1:\(h.adminPort)/dashboard"
        let netLog = out.appendingPathComponent("netlog.json").path
        try? FileManager.default.removeItem(atPath: netLog)

        // 35 s of virtual time: the page renders from its embedded data, then refreshes once from /dashboard.json.
        let dump = try BoundedCommand.run(Self.chromium, Self.flags(profile: profile) + [
            "--log-net-log=\(netLog)", "--virtual-time-budget=35000", "--dump-dom", url], timeout: 90)
        #expect(dump.status == 0, "\(dump.stderr)")
        let dom = dump.stdout
        try dom.write(to: out.appendingPathComponent("dashboard-dom.html"), atomically: true, encoding: .utf8)
        for (name, counts) in DashboardEndToEndTests.expected {
            guard let row = Self.row(dom, name) else {
                Issue.record("no row for route \(name) in the DOM")
                continue
            }
            let verdict = try #require(DashboardEndToEndTests.expectedVerdicts[name])
            #expect(row.contains(">\(verdict)</span>"), "\(name): \(row)")
            for (i, category) in ["verified", "outdated_client", "unknown_origin", "invalid", "reused"].enumerated() {
                #expect(row.contains(#"<td data-category="\#(category)">\#(counts[i])<"#), "\(name) \(category): \(row)")
            }
            #expect(row.contains(#"<td class="total">\#(counts.reduce(0, +))</td>"#), "\(name): \(row)")
            #expect(dom.contains(#"<section class="route" id="route-\#(name)""#), "no chart card for \(name)")
        }
        #expect(dom.contains("<svg"), "no chart drawn")
        #expect(dom.contains(#"<span class="ok">ok</span>"#), "key set not shown as ok")

        // The network log. Requests made for the page carry its origin (initiator or network isolation key
        // 127.0.0.1); every one of them must go to the admin listener. Chromium's own background requests
        // (update checks, account probes: no page origin) fail to resolve under --host-resolver-rules and are
        // not the page's doing; they are listed in the message when something else goes wrong.
        let logData = try Data(contentsOf: URL(fileURLWithPath: netLog))
        let all = Self.requests(in: try JSONSerialization.jsonObject(with: logData))
        let admin = "http://127.0.0.1:\(h.adminPort)/"
        let fromPage = all.filter { $0.initiator.contains("127.0.0.1") || $0.isolation.contains("127.0.0.1") }
        let foreign = fromPage.filter { !$0.url.hasPrefix(admin) }.map(\.url)
        #expect(foreign.isEmpty, "the page requested other hosts: \(foreign)")
        let pageURLs = Set(fromPage.map(\.url))
        // The page itself and its refresh; the browser may also ask for /favicon.ico on its own.
        #expect(pageURLs.isSuperset(of: [url, admin + "dashboard.json"]), "page requests: \(pageURLs.sorted()); all: \(all.map(\.url))")
        #expect(pageURLs.isSubset(of: [url, admin + "dashboard.json", admin + "favicon.ico"]), "page requests: \(pageURLs.sorted())")

        // Screenshots for people (laptop and phone widths); the README's docs/dashboard.png comes from here.
        for (file, size) in [("dashboard.png", "1280,1100"), ("dashboard-phone.png", "390,1400")] {
            let path = out.appendingPathComponent(file).path
            try? FileManager.default.removeItem(atPath: path)
            let shot = try BoundedCommand.run(Self.chromium, Self.flags(profile: profile) + [
                "--window-size=\(size)", "--virtual-time-budget=3000", "--screenshot=\(path)", url], timeout: 90)
            #expect(shot.status == 0, "\(shot.stderr)")
            let png = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "\(file) is not a PNG")
        }
    }

    /// The fragment of `dom` from `start` to the first `end` after it.
    static func slice(_ dom: String, from start: String, to end: String) -> String? {
        guard let a = dom.range(of: start), let b = dom[a.upperBound...].range(of: end) else { return nil }
        return String(dom[a.lowerBound..<b.upperBound])
    }

    /// Every capture of `pattern`'s first group in `text`.
    static func captures(_ pattern: String, in text: String) throws -> [String] {
        let regex = try NSRegularExpression(pattern: pattern)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
            Range($0.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    /// What newcomers saw wrong (issues 26 and 39), read from the rendered DOM of a gateway with an issuer, no
    /// Firebase key set (`url: none`) and small counts: the issuer block lists its results by count, most first, each
    /// named once (no "jwks jwks"), only refusals in red (`jwks`, `challenge` and `minted` are not refusals), a refusal
    /// with its method; the key set card is neutral "not used" and shows the issuer's own key; the Fraud risk line
    /// holds the whole App ID in one unbreakable span on a line of its own; a chart's y axis has distinct whole-number
    /// ticks (0 and 1 for one request; 0 to 3 for three); one request is "1 request"; no "0.00%" under zero counts;
    /// and in the hour window an empty route's chart spans what the others span, ending no later than now.
    @Test func smallCountsAndTheIssuerBlockReadRight() throws {
        let rig = try IssuerEndToEndTests.Rig(jwksURL: "none")
        defer { rig.stop() }
        #expect(try rig.request("GET", "/appcheck/v1/jwks").status == 200)
        let (attested, artifact) = try rig.attest()
        #expect(attested.status == 200, "\(attested.bodyText)")
        #expect(try rig.assert(artifact, limitedUse: false).status == 200)
        let debug = try rig.post("exchangeDebugToken", #"{"debug_token":"\#(IssuerEndToEndTests.debugSecret)"}"#)
        #expect(debug.status == 200, "\(debug.bodyText)")
        for _ in 0..<4 { #expect(try rig.post("exchangeDebugToken", #"{"debug_token":"wrong-secret-0123456789"}"#).status == 403) }
        #expect(try rig.request("POST", "/appcheck/v1/projects/123456789012/apps/1:123456789012:ios:ffffffffffffffff:exchangeDebugToken", "{}").status == 404)
        // One request on `orders`, three on `attested`.
        #expect(try rig.call("GET", "/api/x", token: try IssuerEndToEndTests.token(debug)).status == 200)
        let session = try IssuerEndToEndTests.token(attested, path: ["appCheckToken", "token"])
        for _ in 0..<3 { #expect(try rig.call("GET", "/attested/x", token: session).status == 200) }

        let profile = NSTemporaryDirectory() + "dashboard-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let dump = try BoundedCommand.run(Self.chromium, Self.flags(profile: profile) + [
            "--virtual-time-budget=3000", "--dump-dom", "http://127.0.0.1:\(rig.gateway.adminPort)/dashboard"], timeout: 90)
        #expect(dump.status == 0, "\(dump.stderr)")
        let dom = dump.stdout

        // The issuer block, by result over the day: 4 wrong debug secrets, 3 minted (attestation, assertion, debug),
        // 2 challenges, the key set once, an unknown app once (ties by name): 11 exchanges.
        let issuer = try #require(Self.slice(dom, from: #"<div id="issuer">"#, to: "</div>"), "no issuer block")
        #expect(issuer.contains("11 exchanges in the last day"), "\(issuer)")
        let listed = try Self.captures(#"<span class="exchange[^"]*" data-result="([^"]+)""#, in: issuer)
        #expect(listed == ["permission_denied", "minted", "challenge", "jwks", "not_found"], "\(issuer)")
        for (classes, result) in zip(try Self.captures(#"<span class="(exchange[^"]*)" data-result"#, in: issuer), listed) {
            let refusal = !["minted", "challenge", "jwks"].contains(result)
            #expect(classes == (refusal ? "exchange bad" : "exchange"), "\(result) shown as \(classes)")
        }
        #expect(issuer.contains("> · permission_denied 4 (exchangeDebugToken)</span>"), "\(issuer)")
        #expect(issuer.contains("> · jwks 1</span>") && !issuer.contains("jwks jwks"), "\(issuer)")
        #expect(!issuer.contains("more in /dashboard.json"), "\(issuer)")

        // The key set under `url: none`: a choice, not a fault; the issuer's own key beside it.
        let keySet = try #require(Self.slice(dom, from: #"<div id="key-set">"#, to: "</div>"), "no key set block")
        #expect(keySet.contains("Firebase's: not used") && !keySet.contains("class=\"bad\""), "\(keySet)")
        #expect(keySet.contains("own issuer: 1 key (local), signs with <span class=\"kid\" title=\""), "\(keySet)")

        // The Fraud risk line: the whole App ID in one span that does not wrap, on a status line of the full width.
        let risk = try #require(Self.slice(dom, from: #"<div id="issuer-risk">"#, to: "</div>"), "no Fraud risk line")
        #expect(risk.contains(#"<span class="app-id">\#(IssuerEndToEndTests.appId)</span>"#), "\(risk)")
        #expect(dom.contains("#issuer-risk{grid-column:1/-1}") && dom.contains(".app-id{white-space:nowrap}"))
        #expect(!dom.contains(">0.00%<"), "a share of 0.00% under a zero count")

        // Charts: ticks are distinct whole numbers from 0 to the top.
        let orders = try #require(Self.slice(dom, from: #"<section class="route" id="route-orders""#, to: "</section>"))
        #expect(try Self.captures(#"class="y-tick"[^>]*>([^<]*)</text>"#, in: orders) == ["0", "1"], "\(orders)")
        #expect(orders.contains(">1 request in the last day<"), "\(orders)")
        let three = try #require(Self.slice(dom, from: #"<section class="route" id="route-attested""#, to: "</section>"))
        #expect(try Self.captures(#"class="y-tick"[^>]*>([^<]*)</text>"#, in: three) == ["0", "1", "2", "3"], "\(three)")
        #expect(three.contains(">3 requests in the last day<"), "\(three)")
        let row = try #require(Self.row(dom, "orders"))
        #expect(row.contains("1 request, fewer than min_requests 1000"), "\(row)")
        #expect(!dom.contains("1 requests"), "a count of one in the plural somewhere on the page")

        // The hour window: `open` (an off route, nothing counted) spans the same hour as `attested`, and no chart
        // ends after the moment the page was made.
        let hour = try BoundedCommand.run(Self.chromium, Self.flags(profile: profile) + [
            "--virtual-time-budget=3000", "--dump-dom", "http://127.0.0.1:\(rig.gateway.adminPort)/dashboard#hour"], timeout: 90)
        #expect(hour.status == 0, "\(hour.stderr)")
        let madeBy = Date()
        func span(_ route: String) throws -> [String] {
            let card = try #require(Self.slice(hour.stdout, from: #"<section class="route" id="route-\#(route)""#, to: "</section>"))
            return try Self.captures(#"class="x-start"[^>]*>([^<]*)</text>"#, in: card)
                + Self.captures(#"class="x-end"[^>]*>([^<]*)</text>"#, in: card)
        }
        let empty = try span("open"), full = try span("attested")
        #expect(empty.count == 2 && empty == full, "open \(empty), attested \(full)")
        let minutes = try empty.map { label -> Int in
            let parts = try Self.captures(#"(\d+)"#, in: label).compactMap { Int($0) }
            let pm = label.contains("PM") && parts.first != 12, am12 = label.contains("AM") && parts.first == 12
            return ((parts.first ?? 0) % (am12 ? 12 : 24) + (pm ? 12 : 0)) * 60 + (parts.dropFirst().first ?? 0)
        }
        if minutes.count == 2, minutes[1] > minutes[0] {   // not across midnight
            #expect(minutes[1] - minutes[0] >= 59, "\(empty): the chart spans less than the hour")
            let clock = Calendar.current.dateComponents([.hour, .minute], from: madeBy)
            #expect(minutes[1] <= (clock.hour ?? 0) * 60 + (clock.minute ?? 0), "\(empty) ends after now")
        }
    }

    /// A route whose tokens are mostly reused is as loud as one with missing tokens (docs/dashboard.md): its verdict
    /// stays `wait` (the documented rules) with the reuse named, in the investigate colour, sorted first with it.
    @Test func aHeavyReplayShareIsAsVisibleAsInvestigate() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: calm, prefix: /calm/, upstream: api, enforcement: monitor }
              - { name: missing, prefix: /missing/, upstream: api, enforcement: monitor }
              - { name: replayed, path: /replayed, upstream: api, enforcement: enforce, replay_protection: true }
            """, appCheck: "  jwks: { url: \(issuer.jwksURL) }\n  clock_skew: 0s", top: "dashboard: { min_requests: 5 }")
        }
        defer { h.stop() }
        try h.waitUntilReady()
        func send(_ path: String, token: String?) throws -> Int {
            try RawHTTPClient.roundTrip(port: h.port, "POST \(path) HTTP/1.1\r\nHost: api\r\n"
                + (token.map { "X-Firebase-AppCheck: \($0)\r\n" } ?? "") + "Content-Length: 0\r\n\r\n").status
        }
        let session = try issuer.mint(appId: "1:123456789012:ios:aaaa")
        for _ in 0..<7 { #expect(try send("/calm/x", token: session) == 200) }
        for _ in 0..<6 { #expect(try send("/missing/x", token: session) == 200) }
        #expect(try send("/missing/x", token: nil) == 200)          // one missing in seven: investigate
        ReplayE2E.waitForNextSecond()
        let limited = try issuer.mint(appId: "1:123456789012:ios:aaaa", ttl: 300, jti: UUID().uuidString)
        #expect(try send("/replayed", token: limited) == 200)
        for _ in 0..<6 { #expect(try send("/replayed", token: limited) == 401) }   // 6 of 7 reused

        let profile = NSTemporaryDirectory() + "dashboard-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let dump = try BoundedCommand.run(Self.chromium, Self.flags(profile: profile) + [
            "--virtual-time-budget=3000", "--dump-dom", "http://127.0.0.1:\(h.adminPort)/dashboard"], timeout: 90)
        #expect(dump.status == 0, "\(dump.stderr)")
        let dom = dump.stdout
        let replayed = try #require(Self.row(dom, "replayed"))
        #expect(replayed.contains(#"<span class="pill v-investigate alert""#) && replayed.contains(">wait</span>"), "\(replayed)")
        #expect(replayed.contains("reused 85.71% &gt; 1% of 7 requests"), "\(replayed)")
        let missing = try #require(Self.row(dom, "missing"))
        #expect(missing.contains(#"<span class="pill v-investigate""#) && missing.contains(">investigate</span>"), "\(missing)")
        let order = try Self.captures(#"<tr data-route="([^"]+)">"#, in: dom)
        #expect(Array(order.prefix(2)).sorted() == ["missing", "replayed"] && order.last == "calm", "\(order)")
    }
}
