import AppCheck
import Foundation
import Gateway
import GatewayTools
import Glibc
import Testing
import TestSupport

/// Operating the gateway end to end: the demo's printed commands pasted into a shell, SIGHUP and SIGTERM under
/// load against the built binary, secrets kept out of every log line (README, Commands; docs/configuration.md, docs/operations.md), and the compose file.
@Suite(.serialized) struct OperationsTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func tempFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ops-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Kills a child still running at the end of a test (SIGKILL: children inherit the test's blocked SIGTERM).
    static func reap(_ p: GatewayProcess) {
        if p.process.isRunning { kill(p.process.processIdentifier, SIGKILL) }
        _ = p.waitForExit(timeout: 10)
    }

    /// Runs one line as a shell would when it is pasted (`/bin/sh -c`), killed after `timeout` seconds.
    static func paste(_ line: String, timeout: Double = 15) throws -> ProcessResult {
        try BoundedCommand.run("/bin/sh", ["-c", line], timeout: timeout)
    }

    static func count(_ lines: [String], message: String) -> Int {
        lines.filter { $0.contains("\"message\":\"\(message)") }.count
    }

    // MARK: 1. demo

    /// `appcheck-gateway demo` prints numbered curl commands; each, pasted into a shell, does what its
    /// caption says, and so does the printed `mint` command.
    @Test func demoPrintsCommandsThatWorkWhenPasted() throws {
        // The demo's ports are fixed numbers in its configuration (its issuer URL names the port), so they are
        // picked here; another test may take one between the pick and the demo's bind: then pick again.
        var started: (demo: GatewayProcess, port: UInt16, adminPort: UInt16)?
        for _ in 0..<5 where started == nil {
            let port = try TestPKI.freePort()
            var adminPort = try TestPKI.freePort()
            while adminPort == port { adminPort = try TestPKI.freePort() }
            var env = ProcessInfo.processInfo.environment
            env["DEMO_PORT"] = String(port)
            env["DEMO_ADMIN_PORT"] = String(adminPort)
            let demo = try GatewayProcess(arguments: ["demo", "--config", Self.repoRoot.appendingPathComponent("Config/demo.yaml").path],
                                          environment: env)
            // The mint line is the last one of the banner, printed (and flushed) once the gateway is ready.
            do {
                try demo.waitForLine(containing: " mint --key ", timeout: 60)
                started = (demo, port, adminPort)
            } catch {
                Self.reap(demo)
                guard demo.lines.contains(where: { $0.contains("Address already in use") }) else { throw error }
            }
        }
        let (demo, port, adminPort) = try #require(started, "no free ports for the demo in five tries")
        defer { Self.reap(demo) }
        let banner = demo.lines
        #expect(banner.contains { $0.contains("Ready: yes") }, "\(banner)")
        #expect(banner.contains { $0.contains("gateway   http://127.0.0.1:\(port)") }, "\(banner)")
        #expect(banner.contains { $0.contains("admin     http://127.0.0.1:\(adminPort)") }, "\(banner)")

        // Each step's command lines as printed (curl, a for loop of curls, or NAME='token'), under the number of
        // the caption above them. A user pastes the steps in order into one shell; each step here runs after the
        // assignments of the steps before it.
        var commands: [Int: [String]] = [:]
        var current = 0
        for line in banner {
            if let dot = line.firstIndex(of: "."), let n = Int(line[..<dot]), line[dot...].hasPrefix(". ") { current = n }
            if line.hasPrefix("curl ") || line.hasPrefix("for ") || line.range(of: #"^[A-Z]+='"#, options: .regularExpression) != nil {
                commands[current, default: []].append(line)
            }
        }
        #expect(commands.keys.sorted() == [1, 2, 3, 4, 5], "\(commands)")
        var assignments: [String] = []
        func paste(_ step: Int, _ index: Int) throws -> ProcessResult {
            let lines = try #require(commands[step])
            assignments += lines.filter { $0.range(of: #"^[A-Z]+='"#, options: .regularExpression) != nil && !assignments.contains($0) }
            let runnable = lines.filter { !$0.contains("='") || $0.hasPrefix("for ") || $0.hasPrefix("curl ") }
            return try Self.paste((assignments + [runnable[index]]).joined(separator: "\n"))
        }

        let one = try paste(1, 0)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stdout.hasPrefix("HTTP/1.1 200"), "\(one.stdout)")
        #expect(one.stdout.contains("\"x-appcheck-status\":\"verified\""), "\(one.stdout)")
        #expect(try paste(1, 1).stdout == "200 200 200 200 \n")

        let two = try paste(2, 0)
        #expect(two.stdout.hasPrefix("HTTP/1.1 401"), "\(two.stdout)")
        #expect(two.stdout.contains("app_check_token_missing"), "\(two.stdout)")

        let three = try paste(3, 0)
        #expect(three.stdout.hasPrefix("HTTP/1.1 200"), "\(three.stdout)")
        #expect(three.stdout.contains("\"x-appcheck-reason\":\"missing\""), "\(three.stdout)")
        #expect(try paste(3, 1).stdout == "200 200 200 200 \n")

        let first = try paste(4, 0)
        #expect(first.stdout.hasPrefix("HTTP/1.1 200"), "\(first.stdout)")
        let second = try paste(4, 1)
        #expect(second.stdout.hasPrefix("HTTP/1.1 401"), "\(second.stdout)")
        #expect(second.stdout.contains("app_check_token_reused"), "\(second.stdout)")
        #expect(try paste(4, 2).stdout == "401 401 401 \n")

        // The banner's promise: after steps 1-4 every route has a verdict, the one its caption names.
        let dashboard = try RawHTTPClient.roundTrip(port: adminPort, "GET /dashboard.json HTTP/1.1\r\nHost: a\r\n\r\n")
        let routes = try #require((try JSONSerialization.jsonObject(with: Data(dashboard.body)) as? [String: Any])?["routes"] as? [[String: Any]])
        var verdicts: [String: String] = [:]
        for route in routes {
            let day = (route["windows"] as? [String: Any])?["day"] as? [String: Any]
            verdicts[route["name"] as? String ?? "?"] = (day?["verdict"] as? [String: Any])?["verdict"] as? String
        }
        #expect(verdicts == ["orders": "investigate", "public": "investigate", "redeem": "wait"], "\(verdicts)")

        // docs/issuer.md's issuer curls, written for `make demo`'s 127.0.0.1:8080, work on this demo's port verbatim
        // otherwise: a debug token that opens the enforced route, and an App Attest challenge. (After the verdicts
        // above: the token's request adds to `orders`.)
        let doc = try String(contentsOfFile: Self.repoRoot.appendingPathComponent("docs/issuer.md").path, encoding: .utf8)
        let examples = doc.split(separator: "\n").map(String.init).filter { $0.hasPrefix("curl ") && $0.contains("127.0.0.1:8080/appcheck/") }
        #expect(examples.count == 2, "\(examples)")
        let here = examples.map { $0.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)") }
        let debugExchange = try Self.paste(try #require(here.first { $0.hasSuffix(":exchangeDebugToken'") }))
        let debugJSON = try #require(try JSONSerialization.jsonObject(with: Data(debugExchange.stdout.utf8)) as? [String: Any],
                                     "\(debugExchange.stdout)\(debugExchange.stderr)")
        #expect(debugJSON["ttl"] as? String == "3600s", "\(debugJSON)")
        let debugToken = try #require(debugJSON["token"] as? String)
        #expect(try RawHTTPClient.roundTrip(port: port, "GET /api/orders HTTP/1.1\r\nHost: demo\r\nX-Firebase-AppCheck: \(debugToken)\r\n\r\n").status == 200)
        let challenge = try Self.paste(try #require(here.first { $0.hasSuffix(":generateAppAttestChallenge'") }))
        let challengeJSON = try #require(try JSONSerialization.jsonObject(with: Data(challenge.stdout.utf8)) as? [String: Any],
                                         "\(challenge.stdout)")
        #expect(challengeJSON["ttl"] as? String == "300s" && (challengeJSON["challenge"] as? String)?.isEmpty == false, "\(challengeJSON)")

        let mintLine = try #require(banner.first { $0.contains(" mint --key ") })
        let minted = try Self.paste(mintLine)
        #expect(minted.status == 0, "\(minted.stderr)")
        let token = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.split(separator: ".").count == 3, "\(minted.stdout)")
        let withMinted = try RawHTTPClient.roundTrip(
            port: port, "GET /api/orders HTTP/1.1\r\nHost: demo\r\nX-Firebase-AppCheck: \(token)\r\n\r\n")
        #expect(withMinted.status == 200, "\(withMinted.bodyText)")

        // Last, so that it counts everything above.
        let five = try paste(5, 0)
        #expect(five.status == 0, "\(five.stderr)")
        let metrics = five.stdout.split(separator: "\n")
        #expect(!metrics.isEmpty && metrics.allSatisfy { $0.contains("appcheck_requests_total") }, "\(five.stdout)")
        #expect(metrics.contains { $0.contains("route=\"orders\"") && $0.contains("outcome=\"verified\"") && $0.hasSuffix(" 7") },
                "\(five.stdout)")
        #expect(metrics.contains { $0.contains("route=\"redeem\"") && $0.contains("outcome=\"reused\"") && $0.hasSuffix(" 4") },
                "\(five.stdout)")
        #expect(metrics.contains { $0.contains("route=\"public\"") && $0.contains("outcome=\"unknown_origin\"") }, "\(five.stdout)")
        let verdictLines = try paste(5, 1)
        #expect(verdictLines.stdout.contains(#""verdict":"investigate""#) && verdictLines.stdout.contains(#""verdict":"wait""#),
                "\(verdictLines.stdout)")

        // Ctrl-C stops it cleanly.
        demo.signal(SIGINT)
        #expect(demo.waitForExit(timeout: 15) == 0)
    }

    // MARK: 2. reload under load

    static func loadConfig(upstream: String, withB: Bool, logLevel: String, grace: String = "5s") -> String {
        var routes = """
              - name: a
                path: /a
                upstream: api
                enforcement: off
            """
        if withB {
            routes += """

                  - name: b
                    path: /b
                    upstream: api
                    enforcement: off
                """
        }
        return GatewayHarness.config(upstream: upstream, routes: routes, server: "  log_level: \(logLevel)",
                                     limits: ["shutdown_grace": grace])
    }

    static func status(_ port: UInt16, _ path: String) -> Int? {
        (try? RawHTTPClient.roundTrip(port: port, "GET \(path) HTTP/1.1\r\nHost: probe\r\n\r\n"))?.status
    }

    /// Waits (at most `timeout` seconds) until `GET path` answers `expected`.
    static func waitForStatus(_ port: UInt16, _ path: String, _ expected: Int, timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if status(port, path) == expected { return true }
            usleep(5_000)
        }
        return false
    }

    /// Five valid reloads and one broken file while four clients hammer the gateway over keep-alive
    /// connections: not one request fails.
    @Test func reloadUnderLoadFailsNoRequest() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let url = "http://127.0.0.1:\(upstream.address.port)"
        let path = try Self.tempFile(Self.loadConfig(upstream: url, withB: false, logLevel: "info"))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gw = try GatewayProcess.serve(config: path, timeout: 30)
        defer { Self.reap(gw) }
        #expect(Self.status(gw.port, "/a") == 200)

        let started = Date()
        let load = KeepAliveLoad(port: gw.port, path: "/a", threads: 4)
        defer { load.stop() }
        #expect(load.waitForResponses(50, timeout: 20), "load did not start: \(load.failures)")

        // Each reload flips whether /b exists, so its effect is observed before the next SIGHUP (two signals
        // pending at once would merge into one).
        for i in 0..<5 {
            let withB = i % 2 == 0
            try Self.loadConfig(upstream: url, withB: withB, logLevel: i % 2 == 0 ? "debug" : "info")
                .write(toFile: path, atomically: true, encoding: .utf8)
            gw.signal(SIGHUP)
            #expect(Self.waitForStatus(gw.port, "/b", withB ? 200 : 404), "reload \(i + 1) not applied")
        }
        try "server:\n  listen: [\"127.0.0.1:0\"\nroutes: 5\n".write(toFile: path, atomically: true, encoding: .utf8)
        let seen = gw.lines.count
        gw.signal(SIGHUP)
        try gw.waitForLine(containing: "reload refused", after: seen, timeout: 20)
        // The broken file changed nothing: the last good config (with /b) still serves.
        #expect(Self.status(gw.port, "/b") == 200)

        // The load goes on past the refused reload: more responses arrive on the same connections.
        let afterReloads = load.responseCount
        #expect(load.waitForResponses(afterReloads + 200, timeout: 20), "load stalled after the reloads: \(load.failures)")
        #expect(load.stop(timeout: 20), "load threads did not stop")

        let statuses = load.statuses
        let total = statuses.values.reduce(0, +)
        #expect(load.failures.isEmpty, "\(load.failures.prefix(5))")
        #expect(statuses.keys.sorted() == [200], "\(statuses)")
        print("reloadUnderLoadFailsNoRequest: \(total) responses, all 200, over \(Date().timeIntervalSince(started)) s")

        let lines = gw.lines
        #expect(Self.count(lines, message: "configuration reloaded") == 5)
        #expect(Self.count(lines, message: "reload refused") == 1)
        gw.signal(SIGTERM)
        #expect(gw.waitForExit(timeout: 15) == 0)
    }

    // MARK: 3. drain under load

    /// SIGTERM with slow requests in flight and a load loop running: every request that reached the gateway
    /// is answered 200 (with `Connection: close`), connects are refused from the "draining" line on, and the
    /// process exits 0 well within `shutdown_grace`.
    @Test func drainUnderLoadFinishesInFlightAndExitsZero() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let grace = 5.0
        let delayMs = 2500
        let config = GatewayHarness.config(upstream: "http://127.0.0.1:\(upstream.address.port)", routes: """
              - name: all
                prefix: /
                upstream: api
                enforcement: off
            """, limits: ["shutdown_grace": "5s"], upstreamExtra: "    response_timeout: 10s")
            .replacingOccurrences(of: "    response_timeout: 2s\n", with: "")
        let path = try Self.tempFile(config)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gw = try GatewayProcess.serve(config: path, timeout: 30)
        defer { Self.reap(gw) }

        // The load runs first, so that nothing slow stands between the slow requests and the signal.
        let load = KeepAliveLoad(port: gw.port, path: "/load", threads: 3)
        defer { load.stop() }
        #expect(load.waitForResponses(30, timeout: 10), "load did not start: \(load.failures)")

        // Slow requests, each on its own connection, all received by the upstream before anything else runs.
        let slow = try (0..<4).map { _ in try RawHTTPClient(port: gw.port, timeout: 10) }
        let sentAt = Date()
        for c in slow { try c.send("GET /delay/\(delayMs) HTTP/1.1\r\nHost: slow\r\n\r\n") }
        let deadline = Date().addingTimeInterval(10)
        while upstream.receivedHeads.filter({ $0.hasPrefix("GET /delay/") }).count < slow.count && Date() < deadline {
            usleep(2_000)
        }
        try #require(upstream.receivedHeads.filter { $0.hasPrefix("GET /delay/") }.count == slow.count)

        let signalled = Date()
        // Otherwise the slow requests were not in flight at SIGTERM and this test proves less than it claims.
        try #require(signalled.timeIntervalSince(sentAt) < Double(delayMs) / 1000 - 0.3, "machine too slow for this test")
        let seen = gw.lines.count
        gw.signal(SIGTERM)
        try gw.waitForLine(containing: "\"message\":\"draining\"", after: seen, timeout: 5)
        #expect(throws: (any Error).self, "a connect after the draining line was accepted") {
            _ = try RawHTTPClient(port: gw.port, timeout: 2)
        }

        for (i, c) in slow.enumerated() {
            let r = try c.readResponse()
            #expect(r.status == 200, "slow request \(i): \(r.status) \(r.bodyText)")
            #expect(r.header("Connection") == "close")
            #expect(c.waitForClose(timeout: 5))
        }
        #expect(Date().timeIntervalSince(sentAt) >= Double(delayMs) / 1000 - 0.05)

        // The load threads end on their own: their connections are closed after the response in flight, and the
        // reconnect is refused.
        #expect(load.waitForThreads(timeout: 10), "load threads still running")
        let status = gw.waitForExit(timeout: grace + 5)
        #expect(status == 0, "exit status \(String(describing: status)); \(gw.lines.suffix(3))")

        let statuses = load.statuses
        #expect(statuses.keys.sorted() == [200], "\(statuses)")
        let failures = load.failures
        // Nothing failed before SIGTERM. After it, a request racing the close of an idle keep-alive connection,
        // or a connect racing the listener's close, may fail at the connection level: never with a non-200.
        #expect(failures.allSatisfy { $0.time >= signalled }, "\(failures)")
        #expect(failures.contains { $0.connect }, "no load thread saw its reconnect refused: \(failures)")
        // Every request the gateway forwarded was answered to its client: none was cut off by the drain.
        #expect(upstream.requestCount == slow.count + (statuses[200] ?? 0), "upstream saw \(upstream.requestCount)")
        // The pipe may still hold the last lines when the exit is seen: wait (bounded) for them to be read.
        let readBy = Date().addingTimeInterval(5)
        while !gw.lines.contains(where: { $0.contains("\"message\":\"stopped\"") }) && Date() < readBy { usleep(5_000) }
        // Drained, not cut at the end of the grace period: no connection was left to drop.
        let stopped = try #require(gw.lines.first { $0.contains("\"message\":\"stopped\"") })
        #expect(stopped.contains("\"dropped_connections\":0"), "\(stopped)")
        print("drainUnderLoadFinishesInFlightAndExitsZero: \(statuses[200] ?? 0) load responses; failures after SIGTERM: \(failures.count)")
    }

    // MARK: 4. secrets in logs

    struct Sent {
        var id: String
        var path: String
        var token: String?
        var status: Int
        /// verifications.app in the access line.
        var app: String
    }

    /// Requests on enforce, monitor, replay and off routes with valid, tampered, URL-borne, reused and missing
    /// tokens, each with a cookie and an Authorization header: no log line (at debug level) holds any of those
    /// secrets, and each access line reports the verdict and the token's fingerprint.
    @Test func noSecretInAnyLogLine() throws {
        let appId = "1:123456789012:ios:abc123"
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
                  - name: enforced
                    prefix: /e/
                    upstream: api
                    enforcement: enforce
                  - name: monitored
                    prefix: /m/
                    upstream: api
                    enforcement: monitor
                  - name: single-use
                    path: /redeem
                    upstream: api
                    enforcement: enforce
                    replay_protection: true
                  - name: open
                    prefix: /o/
                    upstream: api
                    enforcement: off
                """, server: "  log_level: debug", appCheck: """
                  project_id: "demo-project"
                  clock_skew: 0s
                  jwks:
                    url: \(issuer.jwksURL)
                """)
        }
        var stopped = false
        defer { if !stopped { h.stop() } }
        try h.waitUntilReady()
        ReplayE2E.waitForNextSecond() // the memory replay store refuses tokens minted before it started

        let valid = try issuer.mint(appId: appId)
        var parts = try issuer.mint(appId: appId, jti: UUID().uuidString).split(separator: ".").map(String.init)
        // Tampered: one signature character changed (still base64url, so it fails on the signature).
        let i = parts[2].index(parts[2].startIndex, offsetBy: 20)
        parts[2].replaceSubrange(i...i, with: parts[2][i] == "A" ? "B" : "A")
        let tampered = parts.joined(separator: ".")
        let inURL = try issuer.mint(appId: appId, jti: UUID().uuidString)
        let limited = try issuer.mint(appId: appId, ttl: 300, jti: UUID().uuidString)
        let tokens = [valid, tampered, inURL, limited]
        let cookie = "COOKIESECRET\(UUID().uuidString)"
        let auth = "AUTHSECRET\(UUID().uuidString)"
        let queryValue = "QUERYSECRET\(UUID().uuidString)"

        var sent: [Sent] = []
        func send(_ path: String, token: String?, _ status: Int, _ app: String) throws {
            let id = "ops-\(sent.count + 1)"
            var head = "GET \(path) HTTP/1.1\r\nHost: api\r\nX-Request-Id: \(id)\r\nCookie: session=\(cookie); theme=dark\r\n"
            head += "Authorization: Bearer \(auth)\r\n"
            if let token { head += "X-Firebase-AppCheck: \(token)\r\n" }
            let r = try RawHTTPClient.roundTrip(port: h.port, head + "\r\n")
            #expect(r.status == status, "\(id) \(path): \(r.status) \(r.bodyText)")
            sent.append(Sent(id: id, path: path, token: token, status: status, app: app))
        }
        let query = "?X-Firebase-AppCheck=\(inURL)&next=\(queryValue)"
        try send("/e/orders", token: valid, 200, "VALID")
        try send("/m/orders", token: valid, 200, "VALID")
        try send("/e/orders", token: tampered, 401, "INVALID")
        try send("/m/orders", token: tampered, 200, "INVALID")
        // A token in the URL is refused before any App Check step: the header was missing.
        try send("/e/orders\(query)", token: nil, 400, "MISSING")
        try send("/m/orders\(query)", token: nil, 400, "MISSING")
        try send("/o/orders\(query)", token: nil, 200, "MISSING")
        try send("/redeem", token: limited, 200, "VALID")
        try send("/redeem", token: limited, 401, "INVALID")
        try send("/redeem", token: valid, 401, "INVALID")       // a session token where a limited-use one is required
        try send("/e/orders", token: nil, 401, "MISSING")
        try send("/m/orders", token: nil, 200, "MISSING")
        // Off routes do not look at the token at all (see the note where the lines are checked).
        try send("/o/orders", token: valid, 200, "MISSING")
        try send("/o/orders", token: tampered, 200, "MISSING")
        h.stop()
        stopped = true

        let lines = h.logLines()
        #expect(lines.count >= sent.count, "\(lines)")
        var secrets = tokens + [cookie, auth, queryValue, "session=", "Bearer"]
        for t in tokens {
            let segments = t.split(separator: ".").map(String.init)
            secrets += [segments[1], segments[2]]
            secrets.append(segments[1] + "." + segments[2])
        }
        // Fragments too: a log line holding part of a secret (a truncated token, say) is still a leak.
        for t in tokens { for segment in t.split(separator: ".").dropFirst() { secrets.append(String(segment.prefix(24))) } }
        for s in [cookie, auth, queryValue] { secrets.append(String(s.suffix(24))) }
        for line in lines {
            for secret in secrets where line.contains(secret) {
                Issue.record("log line holds \(secret.prefix(30))…: \(line)")
            }
            #expect(!line.contains("X-Firebase-AppCheck="), "\(line)")
            #expect(!line.contains("COOKIESECRET") && !line.contains("AUTHSECRET") && !line.contains("QUERYSECRET"), "\(line)")
        }

        for s in sent {
            let matching = lines.filter { $0.contains("\"request_id\":\"\(s.id)\"") }
            guard matching.count == 1, let line = matching.first,
                  let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("\(s.id): expected one JSON access line, got \(matching)")
                continue
            }
            #expect(obj["status"] as? Int == s.status, "\(s.id): \(line)")
            #expect(obj["path"] as? String == String(s.path.prefix { $0 != "?" }), "\(s.id): \(line)")
            #expect((obj["verifications"] as? [String: String])?["app"] == s.app, "\(s.id): \(line)")
            let fingerprint = obj["token_sha256"] as? String
            if let token = s.token, !s.path.hasPrefix("/o/") {
                let expected = String(SHA256Digest.hex(AppCheckVerifier.tokenHash(token)).prefix(16))
                #expect(fingerprint == expected, "\(s.id): \(line)")
                #expect(fingerprint?.count == 16 && fingerprint?.allSatisfy(\.isHexDigit) == true, "\(s.id): \(line)")
            } else {
                // No header token (or an off route, which never reads it): no fingerprint.
                #expect(fingerprint == nil, "\(s.id): \(line)")
            }
        }
    }

    // MARK: 5. compose

    /// `Config/compose.yaml` parses as YAML; two gateway replicas built from the Dockerfile share one Redis,
    /// mount the same config read-only, publish distinct ports, use the binary's healthcheck, and set every
    /// environment variable `Config/gateway.example.yaml` reads.
    @Test func composeFileRunsTwoReplicasOnOneRedis() throws {
        let compose = Self.repoRoot.appendingPathComponent("Config/compose.yaml").path
        let script = "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))"
        let r = try BoundedCommand.run("/usr/bin/python3", ["-c", script, compose], timeout: 20)
        try #require(r.status == 0, "compose.yaml does not parse: \(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let services = try #require(doc["services"] as? [String: [String: Any]])
        let redis = try #require(services["redis"])
        #expect(redis["image"] as? String == "redis:7")
        let redisHealth = (redis["healthcheck"] as? [String: Any])?["test"] as? [String]
        #expect(redisHealth?.contains("ping") == true)

        let gateways = services.filter { $0.key != "redis" }
        #expect(gateways.keys.sorted() == ["gateway-1", "gateway-2"])
        let example = try String(contentsOfFile: Self.repoRoot.appendingPathComponent("Config/gateway.example.yaml").path,
                                 encoding: .utf8)
        // Variables the YAML reads (not those in its comments).
        let yamlText = example.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") }
            .map { $0.split(separator: " #", maxSplits: 1, omittingEmptySubsequences: false).first ?? "" }.joined(separator: "\n")
        let variables = Set(yamlText.matches(of: /\$\{([A-Z_][A-Z0-9_]*)/).map { String($0.1) })
        #expect(variables.isSuperset(of: ["FIREBASE_PROJECT_NUMBER", "REPLAY_STORE", "REDIS_URL"]), "\(variables)")

        var redisURLs: Set<String> = []
        var published: [String] = []
        var mounts: Set<String> = []
        for (name, service) in gateways {
            let build = service["build"] as? [String: Any]
            #expect(build?["context"] as? String == "..", "\(name)")
            #expect(build?["dockerfile"] as? String == "Dockerfile", "\(name)")
            #expect(FileManager.default.fileExists(atPath: Self.repoRoot.appendingPathComponent("Dockerfile").path))
            let env = try #require(service["environment"] as? [String: String], "\(name): environment must be a map")
            for v in variables { #expect(env[v] != nil, "\(name) does not set \(v), which gateway.example.yaml reads") }
            #expect(env["REPLAY_STORE"] == "redis", "\(name)")
            #expect(env["FIREBASE_PROJECT_NUMBER"]?.contains("FIREBASE_PROJECT_NUMBER") == true, "\(name)")
            let redisURL = try #require(env["REDIS_URL"])
            redisURLs.insert(redisURL)
            let host = try #require(URL(string: redisURL)?.host, "\(redisURL)")
            #expect(services[host] != nil, "\(name): REDIS_URL host \(host) is not a service")
            let dependsOn = service["depends_on"] as? [String: Any]
            #expect(dependsOn?["redis"] != nil, "\(name)")
            let volumes = service["volumes"] as? [String] ?? []
            let config = volumes.filter { $0.contains(":/etc/appcheck-gateway/gateway.yaml") }
            #expect(config.count == 1 && config.allSatisfy { $0.hasSuffix(":ro") }, "\(name): \(volumes)")
            mounts.formUnion(config)
            if let source = config.first?.split(separator: ":").first {
                let file = Self.repoRoot.appendingPathComponent("Config").appendingPathComponent(String(source)).path
                #expect(FileManager.default.fileExists(atPath: file), "\(name): \(file)")
            }
            let health = (service["healthcheck"] as? [String: Any])?["test"] as? [String] ?? []
            #expect(health.first == "CMD" && health.contains("/usr/local/bin/appcheck-gateway") && health.contains("healthcheck"),
                    "\(name): \(health)")
            // The admin listener has to leave the container's loopback for the published admin port to work.
            #expect(env["ADMIN_LISTEN"]?.hasPrefix("0.0.0.0:") == true, "\(name)")
            let ports = service["ports"] as? [String] ?? []
            #expect(ports.count == 2, "\(name): \(ports)")
            published += ports.map { String($0.split(separator: ":").dropLast().joined(separator: ":")) }
        }
        #expect(redisURLs == ["redis://redis:6379/0"])
        #expect(mounts.count == 1, "replicas mount different configs: \(mounts)")
        #expect(Set(published).count == published.count, "a host port is published twice: \(published)")
    }
}
