import AppCheck
import Foundation
import Testing
import TestSupport

/// `Config/grafana-dashboard.json` and `Config/prometheus-alerts.yaml` (docs/dashboard.md): they parse, and
/// every metric (and selector label) they name is one a running gateway exports on `/metrics`.
@Suite struct MonitoringConfigTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    /// Names the files may use without a running gateway exporting them: none.
    static let specifiedNotYetExported: Set<String> = []

    /// Metric names and the label names seen per metric, from a real gateway's `/metrics` (with a key set, a
    /// replay store, the issuer and some traffic, so every family is present).
    static func exported() throws -> (names: Set<String>, labels: [String: Set<String>]) {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let signing = FileManager.default.temporaryDirectory.appendingPathComponent("monitoring-\(UUID().uuidString).pem").path
        try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: signing, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: signing) }
        let app = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
        let h = try DashboardEndToEndTests.gatewayWithTraffic(issuer, extraTop: """
            issuer:
              issuer_url: https://api.example.com/appcheck
              signing_keys: [\(signing)]
              apps:
                - app_id: "\(app)"
                  debug_secrets: ["monitoring-debug-secret-0123"]
            """)
        defer { h.stop() }
        let body = #"{"debug_token":"monitoring-debug-secret-0123"}"#
        let exchange = try RawHTTPClient.roundTrip(port: h.port, "POST /appcheck/v1/projects/123456789012/apps/\(app):exchangeDebugToken HTTP/1.1\r\nHost: gw\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)", method: "POST")
        #expect(exchange.status == 200, "\(exchange.bodyText)")
        let r = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: admin\r\n\r\n")
        #expect(r.status == 200)
        var names = Set<String>(), labels: [String: Set<String>] = [:]
        for line in r.bodyText.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count == 4 && parts[0] == "#" && parts[1] == "TYPE" {
                let name = String(parts[2])
                names.insert(name)
                if parts[3] == "histogram" { for s in ["_bucket", "_sum", "_count"] { names.insert(name + s) } }
            } else if !line.hasPrefix("#"), let brace = line.firstIndex(of: "{"), let end = line.firstIndex(of: "}") {
                let name = String(line[..<brace])
                let pairs = line[line.index(after: brace)..<end].split(separator: ",")
                labels[name, default: []].formUnion(pairs.compactMap { $0.split(separator: "=").first.map(String.init) })
            }
        }
        return (names, labels)
    }

    /// `(metric, [selector label names])` for every `name{…}` or `name[…]` in a PromQL expression, plus any
    /// bare gateway-prefixed name (so an unexported `appcheck_…` cannot hide without a selector).
    static func references(_ expr: String) -> [(String, [String])] {
        var out: [(String, [String])] = []
        let selector = #/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{([^}]*)\}|\[)/#
        for m in expr.matches(of: selector) {
            let name = String(m.output.1)
            if ["by", "without", "on", "ignoring", "group_left", "group_right"].contains(name) { continue }
            var labelNames: [String] = []
            if let inner = m.output.3 {
                for part in inner.split(separator: ",") {
                    let label = part.prefix { $0.isLetter || $0.isNumber || $0 == "_" }.trimmingCharacters(in: .whitespaces)
                    if !label.isEmpty { labelNames.append(label) }
                }
            }
            out.append((name, labelNames))
        }
        for m in expr.matches(of: #/\b(appcheck|gateway)_[a-z0-9_]+/#) {
            out.append((String(m.output.0), []))
        }
        return out
    }

    static func check(_ exprs: [String], _ what: String, exported: (names: Set<String>, labels: [String: Set<String>]),
                      allowed: Set<String> = []) -> Set<String> {
        var unexported = Set<String>()
        for expr in exprs {
            let refs = references(expr)
            #expect(!refs.isEmpty, "\(what): no metric in \(expr)")
            for (name, labels) in refs {
                guard exported.names.contains(name) else {
                    unexported.insert(name)
                    #expect(allowed.contains(name), "\(what) names \(name), which the gateway does not export: \(expr)")
                    continue
                }
                if let known = exported.labels[name] {
                    for l in labels { #expect(known.contains(l), "\(what): \(name) has no label \(l) (has \(known.sorted()))") }
                }
            }
        }
        return unexported
    }

    /// Every string under an `expr` key, and the template variables' `definition`s.
    static func grafanaQueries(_ object: Any) -> [String] {
        if let d = object as? [String: Any] {
            var out: [String] = []
            for (k, v) in d {
                if (k == "expr" || k == "definition"), let s = v as? String { out.append(s) } else { out += grafanaQueries(v) }
            }
            return out
        }
        if let a = object as? [Any] { return a.flatMap(grafanaQueries) }
        return []
    }

    /// The `expr:` values of an alerting-rules file (single line, or a `|` block of deeper-indented lines).
    static func alertExpressions(_ yaml: String) -> [String] {
        var out: [String] = []
        let lines = yaml.components(separatedBy: "\n")
        var i = 0
        while i < lines.count {
            let line = lines[i]
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            i += 1
            guard trimmed.hasPrefix("expr:") else { continue }
            let rest = trimmed.dropFirst(5).trimmingCharacters(in: .whitespaces)
            if rest != "|" && rest != ">" { out.append(rest); continue }
            let indent = line.prefix { $0 == " " }.count
            var block: [String] = []
            while i < lines.count, lines[i].trimmingCharacters(in: .whitespaces).isEmpty || lines[i].prefix(while: { $0 == " " }).count > indent {
                block.append(lines[i])
                i += 1
            }
            out.append(block.joined(separator: "\n"))
        }
        return out
    }

    @Test func grafanaAndAlertsNameOnlyExportedMetricsAndPromtoolAcceptsTheRules() throws {
        let exported = try Self.exported()
        #expect(exported.names.isSuperset(of: ["appcheck_requests_total", "appcheck_rejections_total", "appcheck_jwks_age_seconds",
                                               "appcheck_replay_store_total", "gateway_upstream_errors_total"]), "\(exported.names.sorted())")

        // Grafana: valid JSON, every panel queries something, every query names exported metrics only.
        let grafanaPath = Self.repoRoot.appendingPathComponent("Config/grafana-dashboard.json").path
        let grafana = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: grafanaPath)))
        let dashboard = try #require(grafana as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        for p in panels where p["type"] as? String != "row" {
            #expect(!Self.grafanaQueries(p).isEmpty, "panel \(p["title"] ?? "?") has no query")
        }
        let queries = Self.grafanaQueries(grafana)
        #expect(queries.count >= 15)
        #expect(Self.check(queries, "grafana-dashboard.json", exported: exported).isEmpty)

        // Alerts: only exported metrics (the issuer's counter included); and promtool agrees.
        let alertsPath = Self.repoRoot.appendingPathComponent("Config/prometheus-alerts.yaml").path
        let exprs = Self.alertExpressions(try String(contentsOfFile: alertsPath, encoding: .utf8))
        #expect(exprs.count == 6)
        let unexported = Self.check(exprs, "prometheus-alerts.yaml", exported: exported, allowed: Self.specifiedNotYetExported)
        #expect(unexported.isSubset(of: Self.specifiedNotYetExported))
        #expect(FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool"), "promtool is missing: make test installs Debian's prometheus")
        let promtool = try BoundedCommand.run("/usr/bin/promtool", ["check", "rules", alertsPath], timeout: 60)
        #expect(promtool.status == 0, "\(promtool.stdout)\(promtool.stderr)")
        #expect(promtool.stdout.contains("SUCCESS: 6 rules found"), "\(promtool.stdout)")
        // And the alerts fire on the situations they are for (and not before): promtool's rule unit tests.
        let unit = try BoundedCommand.run("/usr/bin/promtool", [
            "test", "rules", Self.repoRoot.appendingPathComponent("Tests/alerts/prometheus-alerts.test.yaml").path], timeout: 120)
        #expect(unit.status == 0 && unit.stdout.contains("SUCCESS"), "\(unit.stdout)\(unit.stderr)")
    }

    /// The checker itself catches what it is for: an unexported name, a wrong label.
    @Test func checkerRefusesUnknownMetricsAndLabels() {
        #expect(Self.references(#"sum by (route) (rate(appcheck_requests_total{mode="enforce",outcome!="skipped"}[5m]))"#)
            .contains { $0.0 == "appcheck_requests_total" && $0.1 == ["mode", "outcome"] })
        #expect(Self.references("up == 0").isEmpty == true)
        #expect(Self.references("up{} == 0").map(\.0) == ["up"])
        #expect(Self.references("appcheck_made_up_total > 1").map(\.0) == ["appcheck_made_up_total"])
    }
}
