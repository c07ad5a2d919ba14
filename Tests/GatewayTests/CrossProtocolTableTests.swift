import AppCheck
import Foundation
import Testing
import TestSupport
@testable import Gateway

/// One table of end-to-end cases, each run over HTTP/1.1, h2c (prior knowledge) and h2 over TLS with the same
/// expectations: status, body, response headers, what the upstream saw, the access-log line and metric deltas
/// (docs/behaviour.md: the protocol is a transport detail). Expectations that depend on the transport say so
/// explicitly (only `X-Forwarded-Proto`). Besides each case's own checks, a case whose status or log line differs
/// between protocols fails.
@Suite(.serialized) struct CrossProtocolTableTests {
    enum Transport: String, CaseIterable, CustomStringConvertible {
        case http1, h2c, h2tls
        var description: String { rawValue }
        var proto: String { self == .h2tls ? "https" : "http" }
    }

    struct Request {
        var method = "GET"
        var path: String
        var headers: [(String, String)] = []
        var body: [UInt8]? = nil
    }

    struct Response {
        var status: Int
        var headers: [String: [String]]
        var body: [UInt8]
        /// curl lost the answer to an early RST_STREAM(NO_ERROR) (see `send`); only the log line can be checked.
        var reset = false
        var text: String { String(decoding: body, as: UTF8.self) }
        func header(_ name: String) -> String? { headers[name.lowercased()]?.last }
        /// What the sample upstream saw: its JSON echo's `headers` (lower-cased names).
        var upstreamHeaders: [String: String]? {
            guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else { return nil }
            return object["headers"] as? [String: String]
        }
    }

    /// The access-log line's fields that must agree between protocols.
    struct LogFields: Equatable, CustomStringConvertible {
        var route: String?
        var status: Int?
        var outcome: String?
        var reason: String?
        var description: String { "route=\(route ?? "-") status=\(status ?? 0) outcome=\(outcome ?? "-") reason=\(reason ?? "-")" }
    }

    struct Case {
        var name: String
        /// Builds the request(s) for one transport (tokens are minted per run: limited-use ones are single-use).
        var requests: (Fixture, Transport) throws -> [Request]
        /// The expected status of each request, in order.
        var statuses: [Int]
        /// The route name in metrics and logs; "" for unrouted requests.
        var route: String
        /// App Check outcome and reason on the log line of the last request (nil: absent).
        var outcome: String? = nil
        var reason: String? = nil
        /// Extra checks on the last response.
        var check: (Response, Transport, Fixture) -> [String] = { _, _, _ in [] }
    }

    /// Everything the table runs against: Firebase's stand-in, the gateway with its own issuer, the upstreams.
    final class Fixture: @unchecked Sendable {
        static let appId = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
        static let debugSecret = "table-debug-secret-0123456789"
        let firebase: LocalIssuer
        let pki: TestPKI
        let stale: StaleKeepAliveUpstream
        let gateway: GatewayHarness
        let dir: URL
        let started = Date()

        init() throws {
            firebase = try LocalIssuer()
            pki = try TestPKI()
            stale = try StaleKeepAliveUpstream()
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("table-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let keyPath = dir.appendingPathComponent("issuer.pem").path
            try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: keyPath, atomically: true, encoding: .utf8)
            let closedPort = try TestPKI.freePort()
            let (firebase, pki, stale) = (firebase, pki, stale)
            gateway = try GatewayHarness { upstream in
                """
                server:
                  listen: ["127.0.0.1:0"]
                  admin_listen: "127.0.0.1:0"
                  threads: 1
                  tls:
                    listen: ["127.0.0.1:0"]
                    certificate: \(pki.cert)
                    private_key: \(pki.key)
                  limits:
                    header_timeout: 5s
                    idle_timeout: 10s
                    shutdown_grace: 1s
                    max_header_bytes: 8KiB
                app_check:
                  project_number: "123456789012"
                  project_id: demo-project
                  clock_skew: 1s
                  jwks: { url: "\(firebase.jwksURL)", unknown_kid_refresh_interval: 1s }
                replay: { store: memory }
                issuer:
                  base_path: /appcheck
                  issuer_url: https://api.example.com/appcheck
                  signing_keys: [\(keyPath)]
                  apps:
                    - app_id: "\(Fixture.appId)"
                      debug_secrets: ["\(Fixture.debugSecret)"]
                upstreams:
                  api: { url: "\(upstream)", response_timeout: 60s }
                  slow: { url: "\(upstream)", response_timeout: 1s }
                  down: { url: "http://127.0.0.1:\(closedPort)", connect_timeout: 2s }
                  stale: { url: "http://127.0.0.1:\(stale.port)" }
                routes:
                  - { name: replay, path: /replay, upstream: api, enforcement: enforce, replay_protection: true }
                  - { name: attested, prefix: /attested/, upstream: api, enforcement: enforce, providers: [app_attest] }
                  - { name: enforce, prefix: /enforce/, upstream: api, enforcement: enforce }
                  - { name: monitor, prefix: /monitor/, upstream: api, enforcement: monitor }
                  - { name: small, prefix: /small/, upstream: api, enforcement: off, max_body_bytes: 16 }
                  - { name: slow, prefix: /slow/, upstream: slow, enforcement: off }
                  - { name: down, prefix: /down/, upstream: down, enforcement: off }
                  - { name: stale, prefix: /stale/, upstream: stale, enforcement: off }
                  - { name: off, prefix: /off/, upstream: api, enforcement: off }
                """
            }
            try gateway.waitUntilReady()
        }

        func stop() {
            gateway.stop()
            stale.stop()
            firebase.stop()
            try? FileManager.default.removeItem(at: dir)
        }

        var tlsPort: UInt16 { gateway.server.tlsListenAddresses.first?.port ?? 0 }

        func token(ttl: Int = 3600, jti: String? = nil, appId: String = Fixture.appId, issuedAt: Int? = nil,
                   projectNumber: String = "123456789012", projectId: String = "demo-project") throws -> String {
            try TokenMinter.mint(key: firebase.key, kid: firebase.kid, projectNumber: projectNumber, projectId: projectId,
                                 appId: appId, issuedAt: issuedAt ?? Int(Date().timeIntervalSince1970), ttl: ttl, jti: jti)
        }

        /// A token minted by the gateway's own issuer through its debug exchange (provider `debug`).
        func debugToken() throws -> String {
            let path = "/appcheck/v1/projects/123456789012/apps/\(Fixture.appId):exchangeDebugToken"
            let body = #"{"debug_token":"\#(Fixture.debugSecret)","limited_use":false}"#
            let r = try RawHTTPClient.roundTrip(port: gateway.port, "POST \(path) HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)",
                                                method: "POST", timeout: 60)
            let object = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
            guard let token = object?["token"] as? String else { throw HarnessError("no debug token: \(r.bodyText)") }
            return token
        }

        func send(_ request: Request, over transport: Transport) throws -> Response {
            let headerFile = dir.appendingPathComponent("h-\(UUID().uuidString)").path
            let bodyFile = dir.appendingPathComponent("b-\(UUID().uuidString)").path
            defer { try? FileManager.default.removeItem(atPath: headerFile); try? FileManager.default.removeItem(atPath: bodyFile) }
            var args = ["-sS", "-D", headerFile, "-o", bodyFile, "-w", "%{http_code}", "--max-time", "60"]
            if request.method == "HEAD" { args.append("--head") } else { args += ["-X", request.method] }
            for (name, value) in request.headers { args += ["-H", "\(name): \(value)"] }
            if let body = request.body {
                let input = dir.appendingPathComponent("in-\(UUID().uuidString)").path
                try Data(body).write(to: URL(fileURLWithPath: input))
                args += ["--data-binary", "@\(input)", "-H", "Content-Type: application/octet-stream"]
            }
            switch transport {
            case .http1: args += ["--http1.1", "http://127.0.0.1:\(gateway.port)\(request.path)"]
            case .h2c: args += ["--http2-prior-knowledge", "http://127.0.0.1:\(gateway.port)\(request.path)"]
            case .h2tls: args += ["--http2", "--cacert", pki.caCert, "https://127.0.0.1:\(tlsPort)\(request.path)"]
            }
            let result = try Run.command("curl", args, timeout: 90)
            // The last header block (after any interim 1xx).
            let raw = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
            let blocks = raw.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
            var status = Int(result.stdout.trimmingCharacters(in: .whitespaces)) ?? 0
            if status == 0, result.status == 92, transport != .http1,
               let line = blocks.last?.components(separatedBy: "\r\n").first, line.hasPrefix("HTTP/2 ") {
                // An answer before the whole request body was sent (413 on a declared length) is followed by
                // RST_STREAM(NO_ERROR), as RFC 9113 §8.1 allows; curl 7.88 reports that as error 92 after it has
                // received the complete response. The response itself is what is checked.
                status = Int(line.dropFirst("HTTP/2 ".count).prefix(3)) ?? 0
            }
            if status == 0, result.status == 92, transport != .http1, request.body != nil, blocks.isEmpty {
                // The same reset raced ahead of the answer inside curl: it discarded the response. The gateway's
                // decision is still checked through its access-log line (`Response.reset`).
                return Response(status: 0, headers: [:], body: [], reset: true)
            }
            guard status > 0 else {
                // The gateway's last log lines go with it: a reset seen once under load (curl 55 on an h2c POST) left
                // nothing else to go on.
                throw HarnessError("curl over \(transport): \(result.stdout) \(result.stderr); the gateway's last log lines: "
                                   + gateway.logLines().suffix(8).joined(separator: "\n"))
            }
            var headers: [String: [String]] = [:]
            for line in (blocks.last ?? "").components(separatedBy: "\r\n").dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].lowercased()
                headers[name, default: []].append(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            var body = (try? Data(contentsOf: URL(fileURLWithPath: bodyFile))).map { [UInt8]($0) } ?? []
            // With --head curl writes the header block to the output too: what follows it would be a body.
            if request.method == "HEAD", body.starts(with: Array(raw.utf8)) { body.removeFirst(raw.utf8.count) }
            return Response(status: status, headers: headers, body: body)
        }

        /// The access-log line of request `id` (polled briefly: the loop writes its log after the batch).
        func logLine(_ id: String) -> LogFields? {
            let deadline = Date().addingTimeInterval(3)
            repeat {
                if let line = gateway.logLines().last(where: { $0.contains(#""message":"request""#) && $0.contains(#""request_id":"\#(id)""#) }),
                   let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] {
                    return LogFields(route: object["route"] as? String, status: object["status"] as? Int,
                                     outcome: object["outcome"] as? String, reason: object["reason"] as? String)
                }
                usleep(20_000)
            } while Date() < deadline
            return nil
        }

        func metrics() throws -> [String: Double] {
            let text = try RawHTTPClient.roundTrip(port: gateway.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", timeout: 30).bodyText
            var values: [String: Double] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else { continue }
                values[String(line[..<space])] = v
            }
            return values
        }
    }

    static func upstreamSaw(_ name: String, _ expected: String?) -> (Response, Transport, Fixture) -> [String] {
        { r, _, _ in
            guard let seen = r.upstreamHeaders else { return ["no upstream echo in the body: \(r.text.prefix(200))"] }
            let value = seen[name.lowercased()]
            return value == expected ? [] : ["upstream saw \(name): \(value ?? "nothing"), expected \(expected ?? "nothing")"]
        }
    }

    static func all(_ checks: ((Response, Transport, Fixture) -> [String])...) -> (Response, Transport, Fixture) -> [String] {
        { r, t, f in checks.flatMap { $0(r, t, f) } }
    }

    static func errorCode(_ code: String) -> (Response, Transport, Fixture) -> [String] {
        { r, _, _ in
            let object = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
            let found = object?["error"] as? String
            let id = object?["request_id"] as? String
            var problems: [String] = []
            if found != code { problems.append("error \(found ?? "none"), expected \(code): \(r.text.prefix(200))") }
            if id == nil || id != r.header("x-request-id") { problems.append("request_id in body \(id ?? "none") vs header \(r.header("x-request-id") ?? "none")") }
            if r.header("content-type") != "application/json" { problems.append("content-type \(r.header("content-type") ?? "none")") }
            return problems
        }
    }

    static func get(_ path: String, _ headers: [(String, String)] = []) -> (Fixture, Transport) throws -> [Request] {
        { _, _ in [Request(path: path, headers: headers)] }
    }

    static func withToken(_ path: String, method: String = "GET",
                          _ token: @escaping (Fixture) throws -> String) -> (Fixture, Transport) throws -> [Request] {
        { f, _ in [Request(method: method, path: path, headers: [("X-Firebase-AppCheck", try token(f))])] }
    }

    static var cases: [Case] { [
        // Route modes and the App Check step.
        Case(name: "off route forwards without a token", requests: get("/off/a"), statuses: [200], route: "off",
             outcome: "skipped", check: upstreamSaw("x-appcheck-status", "skipped")),
        Case(name: "enforce: valid token forwarded, token stripped, verdict added", requests: withToken("/enforce/a") { try $0.token() },
             statuses: [200], route: "enforce", outcome: "verified",
             check: all(upstreamSaw("x-firebase-appcheck", nil), upstreamSaw("x-appcheck-status", "verified"),
                        upstreamSaw("x-appcheck-app-id", Fixture.appId))),
        Case(name: "enforce: no token", requests: get("/enforce/a"), statuses: [401], route: "enforce",
             outcome: "unknown_origin", reason: "missing", check: errorCode("app_check_token_missing")),
        Case(name: "enforce: malformed token", requests: withToken("/enforce/a") { _ in "not-a-jwt" }, statuses: [401],
             route: "enforce", outcome: "invalid", reason: "malformed", check: errorCode("app_check_token_invalid")),
        Case(name: "enforce: bad signature", requests: withToken("/enforce/a") { f in
                 // One signature character changed in the middle (the last one carries padding bits).
                 var t = Array(try f.token())
                 let i = t.count - 20
                 t[i] = t[i] == "A" ? "B" : "A"
                 return String(t) },
             statuses: [401], route: "enforce", outcome: "invalid", reason: "bad_signature"),
        Case(name: "enforce: expired", requests: withToken("/enforce/a") { try $0.token(ttl: 60, issuedAt: Int(Date().timeIntervalSince1970) - 3600) },
             statuses: [401], route: "enforce", outcome: "invalid", reason: "expired"),
        Case(name: "enforce: another project's issuer", requests: withToken("/enforce/a") { try $0.token(projectNumber: "999999999999") },
             statuses: [401], route: "enforce", outcome: "invalid", reason: "wrong_issuer"),
        Case(name: "enforce: wrong audience", requests: withToken("/enforce/a") { try $0.token(projectId: "other-project") },
             statuses: [401], route: "enforce", outcome: "invalid", reason: "wrong_audience"),
        Case(name: "enforce: unknown kid", requests: withToken("/enforce/a") { f in
                 try TokenMinter.mint(key: try RSAPrivateKey.generate(bits: 2048), kid: "nobody", projectNumber: "123456789012",
                                      appId: Fixture.appId, issuedAt: Int(Date().timeIntervalSince1970), ttl: 3600) },
             statuses: [401], route: "enforce", outcome: "invalid", reason: "unknown_kid"),
        Case(name: "enforce: two token headers", requests: { f, _ in
                 let t = try f.token(); return [Request(path: "/enforce/a", headers: [("X-Firebase-AppCheck", t), ("X-Firebase-AppCheck", t)])] },
             statuses: [401], route: "enforce", outcome: "invalid", reason: "duplicate_header"),
        Case(name: "enforce: token over the size limit", requests: withToken("/enforce/a") { _ in String(repeating: "a", count: 5000) },
             statuses: [401], route: "enforce", outcome: "invalid", reason: "too_large"),
        Case(name: "enforce: token in the URL", requests: get("/enforce/a?X-Firebase-AppCheck=abc"), statuses: [400],
             route: "enforce", check: errorCode("app_check_token_in_url")),
        Case(name: "off: a token-like query is not refused", requests: get("/off/a?X-Firebase-AppCheck=abc"), statuses: [200],
             route: "off", outcome: "skipped"),
        Case(name: "enforce: CORS preflight bypasses the check", requests: { _, _ in
                 [Request(method: "OPTIONS", path: "/enforce/a", headers: [("Origin", "https://app.example"),
                                                                         ("Access-Control-Request-Method", "POST")])] },
             statuses: [200], route: "enforce", outcome: "skipped", check: upstreamSaw("x-appcheck-status", "skipped")),
        Case(name: "monitor: no token is forwarded with the reason", requests: get("/monitor/a"), statuses: [200],
             route: "monitor", outcome: "unknown_origin", reason: "missing",
             check: all(upstreamSaw("x-appcheck-status", "missing"), upstreamSaw("x-appcheck-reason", "missing"))),
        Case(name: "monitor: invalid token is forwarded with the reason", requests: withToken("/monitor/a") { _ in "x.y.z" },
             statuses: [200], route: "monitor", outcome: "invalid", reason: "malformed",
             check: all(upstreamSaw("x-appcheck-status", "invalid"), upstreamSaw("x-appcheck-reason", "malformed"),
                        upstreamSaw("x-firebase-appcheck", nil))),
        Case(name: "monitor: valid token", requests: withToken("/monitor/a") { try $0.token() }, statuses: [200],
             route: "monitor", outcome: "verified", check: upstreamSaw("x-appcheck-status", "verified")),
        // Replay protection.
        Case(name: "replay: a limited-use token is accepted once", requests: { f, _ in
                 let t = try f.token(ttl: 300, jti: UUID().uuidString)
                 return [Request(method: "POST", path: "/replay", headers: [("X-Firebase-AppCheck", t)]),
                         Request(method: "POST", path: "/replay", headers: [("X-Firebase-AppCheck", t)])] },
             statuses: [200, 401], route: "replay", outcome: "reused", reason: "reused", check: errorCode("app_check_token_reused")),
        Case(name: "replay: a session token is refused", requests: withToken("/replay", method: "POST") { try $0.token() },
             statuses: [401], route: "replay", outcome: "invalid", reason: "limited_use_required"),
        // The gateway's own issuer (a built-in handler) and providers.
        Case(name: "built-in: the issuer's key set", requests: get("/appcheck/v1/jwks"), statuses: [200], route: "issuer",
             check: { r, _, _ in
                 var p: [String] = []
                 if r.header("cache-control") != "public, max-age=3600" { p.append("cache-control \(r.header("cache-control") ?? "none")") }
                 if !r.text.contains(#""kty":"RSA""#) { p.append("no RSA key: \(r.text.prefix(200))") }
                 if r.header("x-request-id") == nil { p.append("no request id") }
                 return p }),
        Case(name: "built-in: a debug exchange mints a token", requests: { _, _ in
                 [Request(method: "POST", path: "/appcheck/v1/projects/123456789012/apps/\(Fixture.appId):exchangeDebugToken",
                          body: Array(#"{"debug_token":"\#(Fixture.debugSecret)"}"#.utf8))] },
             statuses: [200], route: "issuer",
             check: { r, _, _ in r.text.contains(#""ttl":"3600s""#) && r.text.contains(#""token":"ey"#) ? [] : ["body \(r.text.prefix(200))"] }),
        Case(name: "built-in: an unknown method is NOT_FOUND", requests: { _, _ in
                 [Request(method: "POST", path: "/appcheck/v1/projects/123456789012/apps/\(Fixture.appId):exchangeNothing", body: [])] },
             statuses: [404], route: "issuer",
             check: { r, _, _ in r.text.contains(#""status":"NOT_FOUND""#) ? [] : ["body \(r.text.prefix(200))"] }),
        Case(name: "own token opens an enforced route", requests: withToken("/enforce/own") { try $0.debugToken() }, statuses: [200],
             route: "enforce", outcome: "verified", check: upstreamSaw("x-appcheck-app-id", Fixture.appId)),
        Case(name: "providers: a debug token where only App Attest is allowed", requests: withToken("/attested/a") { try $0.debugToken() },
             statuses: [401], route: "attested", outcome: "invalid", reason: "provider_not_allowed"),
        // Forwarding.
        Case(name: "X-Forwarded-For/-Proto/-Host as the upstream sees them", requests: get("/off/fwd", [("X-Forwarded-For", "6.6.6.6")]),
             statuses: [200], route: "off", outcome: "skipped",
             check: { r, t, _ in
                 guard let seen = r.upstreamHeaders else { return ["no echo"] }
                 var p: [String] = []
                 // The client is not a trusted proxy: its X-Forwarded-For is replaced, not extended.
                 if seen["x-forwarded-for"] != "127.0.0.1" { p.append("x-forwarded-for \(seen["x-forwarded-for"] ?? "none")") }
                 if seen["x-forwarded-proto"] != t.proto { p.append("x-forwarded-proto \(seen["x-forwarded-proto"] ?? "none")") }
                 if seen["x-forwarded-host"]?.hasPrefix("127.0.0.1:") != true { p.append("x-forwarded-host \(seen["x-forwarded-host"] ?? "none")") }
                 return p }),
        Case(name: "request id: a valid client id is kept", requests: get("/off/id", [("X-Request-Id", "client-id-123")]),
             statuses: [200], route: "off", outcome: "skipped",
             check: all(upstreamSaw("x-request-id", "client-id-123"),
                        { r, _, _ in r.header("x-request-id") == "client-id-123" ? [] : ["response id \(r.header("x-request-id") ?? "none")"] })),
        Case(name: "request id: an invalid client id is replaced", requests: get("/off/id", [("X-Request-Id", "bad id!")]),
             statuses: [200], route: "off", outcome: "skipped",
             check: { r, _, _ in
                 let id = r.header("x-request-id") ?? ""
                 return id.count == 32 && r.upstreamHeaders?["x-request-id"] == id ? [] : ["response id \(id), upstream \(r.upstreamHeaders?["x-request-id"] ?? "none")"] }),
        Case(name: "underscore header names are dropped", requests: get("/off/u", [("X_AppCheck_Status", "verified")]),
             statuses: [200], route: "off", outcome: "skipped", check: upstreamSaw("x_appcheck_status", nil)),
        Case(name: "client X-AppCheck-* headers are removed", requests: get("/off/spoof", [("X-AppCheck-App-Id", "spoofed")]),
             statuses: [200], route: "off", outcome: "skipped", check: upstreamSaw("x-appcheck-app-id", nil)),
        Case(name: "hop-by-hop response fields are removed", requests: get("/off/hop-by-hop"), statuses: [200], route: "off",
             outcome: "skipped",
             check: { r, _, _ in
                 var p: [String] = []
                 for name in ["keep-alive", "x-private", "upgrade"] where r.header(name) != nil { p.append("\(name) passed") }
                 if r.header("x-request-id") == "upstream-own-id" || r.header("x-request-id") == nil { p.append("x-request-id \(r.header("x-request-id") ?? "none")") }
                 if r.header("x-upstream") != "sample" { p.append("x-upstream missing") }
                 if r.text != "hop\n" { p.append("body \(r.text)") }
                 return p }),
        Case(name: "HEAD gets headers and no body", requests: { _, _ in [Request(method: "HEAD", path: "/off/bytes/1000")] },
             statuses: [200], route: "off", outcome: "skipped",
             check: { r, _, _ in r.body.isEmpty && r.header("content-length") == "1000" ? [] : ["body \(r.body.count) bytes, length \(r.header("content-length") ?? "none")"] }),
        Case(name: "a POST body reaches the upstream intact", requests: { _, _ in
                 [Request(method: "POST", path: "/off/echo", body: (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })] },
             statuses: [200], route: "off", outcome: "skipped",
             check: { r, _, _ in r.body == (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) } ? [] : ["echo differs (\(r.body.count) bytes)"] }),
        Case(name: "a large response streams back whole", requests: get("/off/chunked/300000"), statuses: [200], route: "off",
             outcome: "skipped", check: { r, _, _ in r.body.count == 300_000 ? [] : ["got \(r.body.count) bytes"] }),
        // The gateway's own answers.
        Case(name: "404 without a route", requests: get("/nowhere"), statuses: [404], route: "", check: errorCode("no_route")),
        Case(name: "413 for a declared body over the route's limit", requests: { _, _ in
                 [Request(method: "POST", path: "/small/a", body: Array(repeating: 65, count: 100))] },
             statuses: [413], route: "small", check: errorCode("body_too_large")),
        Case(name: "431 for headers over max_header_bytes", requests: get("/off/a", [("X-Big", String(repeating: "b", count: 12_000))]),
             statuses: [431], route: "", check: errorCode("headers_too_large")),
        Case(name: "502 when the upstream refuses connections", requests: get("/down/a"), statuses: [502], route: "down",
             outcome: "skipped", check: errorCode("upstream_unavailable")),
        Case(name: "504 when the upstream does not answer", requests: get("/slow/hang"), statuses: [504], route: "slow",
             outcome: "skipped", check: errorCode("upstream_timeout")),
        Case(name: "a stale pooled connection is retried once", requests: { _, _ in [Request(path: "/stale/a"), Request(path: "/stale/b")] },
             statuses: [200, 200], route: "stale", outcome: "skipped"),
    ] }

    @Test func everyCaseBehavesTheSameOverHTTP1H2cAndH2() throws {
        let f = try Fixture()
        defer { f.stop() }
        // A fresh memory replay store refuses limited-use tokens issued before its start plus clock_skew (docs/replay.md).
        while Date() < f.started.addingTimeInterval(2.2) { usleep(50_000) }
        #expect(Self.cases.count >= 30)
        for c in Self.cases {
            var seen: [Transport: (status: Int, log: LogFields?)] = [:]
            for transport in Transport.allCases {
                let label = "[\(c.name)] over \(transport)"
                let requests: [Request]
                do { requests = try c.requests(f, transport) } catch {
                    Issue.record("\(label): building the request failed: \(error)")
                    continue
                }
                let before = try f.metrics()
                var last: Response?
                var lastId = ""
                for (i, request) in requests.enumerated() {
                    var r = request
                    let id = "t\(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(24))"
                    if !r.headers.contains(where: { $0.0.lowercased() == "x-request-id" }) { r.headers.append(("X-Request-Id", id)) }
                    let response: Response
                    do { response = try f.send(r, over: transport) } catch {
                        Issue.record("\(label): \(error)")
                        break
                    }
                    if !response.reset { #expect(response.status == c.statuses[i], "\(label): request \(i + 1) status") }
                    last = response
                    lastId = r.headers.first { $0.0.lowercased() == "x-request-id" }?.1 ?? id
                }
                guard let response = last else { continue }
                if !response.reset {
                    for problem in c.check(response, transport, f) { Issue.record("\(label): \(problem)") }
                }
                // The access-log line of the last request (by the id the client sent when it is a valid one).
                let id = response.reset ? lastId : (response.header("x-request-id") ?? "")
                let log = f.logLine(id)
                if let log {
                    #expect(log.route == (c.route.isEmpty ? nil : c.route), "\(label): log route \(log)")
                    #expect(log.status == c.statuses.last, "\(label): log status \(log)")
                    #expect(log.outcome == c.outcome, "\(label): log outcome \(log)")
                    #expect(log.reason == c.reason || c.outcome == nil || c.outcome == "verified" || c.outcome == "skipped",
                            "\(label): log reason \(log)")
                } else {
                    Issue.record("\(label): no access-log line for request id \(id)")
                }
                // Metric deltas: every request counted once under its route and status.
                let after = try f.metrics()
                var expected: [String: Double] = [:]
                for s in c.statuses { expected[#"gateway_requests_total{route="\#(c.route)",status="\#(s)"}"#, default: 0] += 1 }
                for (series, delta) in expected {
                    let got = (after[series] ?? 0) - (before[series] ?? 0)
                    #expect(got == delta, "\(label): \(series) moved by \(got), expected \(delta)")
                }
                if c.route == "stale" {
                    let series = #"gateway_upstream_errors_total{upstream="stale",kind="stale_connection"}"#
                    #expect((after[series] ?? 0) - (before[series] ?? 0) >= 1, "\(label): no stale-connection retry counted")
                }
                seen[transport] = (response.reset ? (log?.status ?? 0) : response.status, log)
            }
            // A difference between protocols fails, whatever the case's own expectations.
            let statuses = Set(seen.values.map(\.status))
            #expect(statuses.count <= 1, "[\(c.name)] statuses differ between protocols: \(seen.mapValues(\.status))")
            let logs = seen.values.compactMap(\.log)
            #expect(Set(logs.map(\.description)).count <= 1, "[\(c.name)] log lines differ between protocols: \(logs)")
        }
    }
}
