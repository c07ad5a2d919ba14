import AppCheck
import Dispatch
import Foundation
import Glibc
@testable import ReplayStores
import Synchronization
import Testing
import TestSupport
@testable import Gateway
@testable import GatewayProcess

/// Replay protection end to end (docs/behaviour.md check 8 and replay protection): a real gateway in front of a real upstream, a real
/// key set from a local issuer, and each replay store for real (memory, an SQLite file, a `redis-server`).

/// The replay stores, as the `replay.store` values.
enum ReplayStoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case memory, sqlite, redis
    var testDescription: String { rawValue }
}

/// One replay store for one test: its `replay:` YAML, the backing file or server, and a way to count entries.
final class ReplayBackend: @unchecked Sendable {
    let kind: ReplayStoreKind
    let directory: String
    let redis: RedisServerProcess?

    init(_ kind: ReplayStoreKind, persistentRedis: Bool = false) throws {
        self.kind = kind
        directory = NSTemporaryDirectory() + "replay-e2e-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        redis = kind == .redis ? try RedisServerProcess(persistent: persistentRedis) : nil
    }

    var sqlitePath: String { directory + "/replay.sqlite" }

    /// The top-level `replay:` section.
    func yaml(timeout: String = "250ms", extra: String = "") -> String {
        var lines = ["replay:", "  store: \(kind.rawValue)", "  timeout: \(timeout)"]
        switch kind {
        case .memory: break
        case .sqlite: lines.append("  sqlite_path: \(sqlitePath)")
        case .redis: lines.append("  redis_url: \(redis!.url)")
        }
        if !extra.isEmpty { lines.append(extra) }
        return lines.joined(separator: "\n")
    }

    /// Entries the store holds, seen from outside the gateway where possible (the SQLite file through the
    /// `sqlite3` CLI, Redis through `DBSIZE`) and through the gateway's own store object for memory.
    func entryCount(_ h: GatewayHarness?) throws -> Int {
        switch kind {
        case .memory:
            guard let h, let store = ReplayE2E.memoryStore(of: h) else { throw HarnessError("no memory store in the gateway") }
            return store.count
        case .sqlite:
            let r = try BoundedCommand.run("/usr/bin/sqlite3", [sqlitePath, "SELECT COUNT(*) FROM replay;"], timeout: 10)
            guard r.status == 0, let n = Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw HarnessError("sqlite3: \(r.status) \(r.stdout) \(r.stderr)")
            }
            return n
        case .redis:
            // Replay keys only, not the 256 group markers (`…since`) the store keeps beside them.
            let r = try BoundedCommand.run(RedisServerProcess.cliPath, ["-h", "127.0.0.1", "-p", String(redis!.port), "KEYS", "*"])
            guard r.status == 0 else { throw HarnessError("redis KEYS failed: \(r.stderr)") }
            return r.stdout.split(separator: "\n").filter { !$0.isEmpty && !$0.hasSuffix("since") }.count
        }
    }

    func stop() {
        redis?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// What one request got back.
struct ReplayAnswer: Sendable, CustomStringConvertible {
    var status: Int
    var error: String?
    var reason: String?
    var retryAfter: String?
    var description: String { "\(status) \(error ?? "-") \(reason ?? "-")" }

    init(_ r: TestResponse) {
        status = r.status
        let obj = (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any]
        error = obj?["error"] as? String
        reason = obj?["reason"] as? String
        retryAfter = r.header("Retry-After")
    }

    var isReused: Bool { status == 401 && error == "app_check_token_reused" && reason == "reused" }
    var isStoreUnavailable: Bool {
        status == 503 && error == "replay_store_unavailable" && retryAfter == "1"
    }
}

/// Thread-safe list of answers, for requests sent from several threads.
final class AnswerList: Sendable {
    private let items = Mutex<[ReplayAnswer]>([])
    func append(_ a: ReplayAnswer) { items.withLock { $0.append(a) } }
    var all: [ReplayAnswer] { items.withLock { $0 } }
}

/// Lets non-Sendable test objects be used from `concurrentPerform` (each index touched by one thread only).
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
}

enum ReplayE2E {
    static let appId = "1:123456789012:ios:abc123"

    static let routes = """
      - name: single-use
        path: /redeem
        upstream: api
        enforcement: enforce
        replay_protection: true
      - name: enforced
        prefix: /e/
        upstream: api
        enforcement: enforce
    """

    /// `clock_skew: 0s` unless `extra` sets it: stores that lost their state (memory at start, a fresh Redis)
    /// refuse tokens minted before they came up plus clock_skew (docs/replay.md), and tests mint right after start.
    static func appCheck(_ issuer: LocalIssuer, extra: String = "") -> String {
        """
          project_id: "demo-project"
          jwks:
            url: \(issuer.jwksURL)
        \(extra.contains("clock_skew") ? "" : "  clock_skew: 0s")
        \(extra)
        """
    }

    /// Waits for the next whole second: tokens carry `iat` in whole seconds, so one minted from then on is not
    /// earlier than a store that came up before this call (clock_skew 0).
    static func waitForNextSecond() {
        let start = Int(Date().timeIntervalSince1970)
        while Int(Date().timeIntervalSince1970) <= start { usleep(10_000) }
    }

    /// The YAML of a gateway with `threads` loops whose replay store is `backend`.
    static func config(upstream: String, issuer: LocalIssuer, backend: ReplayBackend, threads: Int = 1,
                       appCheck extra: String = "", replayExtra: String = "", timeout: String = "250ms") -> String {
        GatewayHarness.config(upstream: upstream, routes: routes, appCheck: appCheck(issuer, extra: extra),
                              top: backend.yaml(timeout: timeout, extra: replayExtra))
            .replacingOccurrences(of: "  threads: 1\n", with: "  threads: \(threads)\n")
    }

    /// An in-process gateway on `backend`, ready.
    static func harness(_ issuer: LocalIssuer, _ backend: ReplayBackend, threads: Int = 1, appCheck extra: String = "",
                        replayExtra: String = "", timeout: String = "250ms") throws -> GatewayHarness {
        let h = try GatewayHarness {
            config(upstream: $0, issuer: issuer, backend: backend, threads: threads, appCheck: extra,
                   replayExtra: replayExtra, timeout: timeout)
        }
        do { try h.waitUntilReady(timeout: 15) } catch { h.stop(); throw error }
        waitForNextSecond()
        return h
    }

    /// A limited-use token: 5 minutes, with a fresh `jti` unless `jti: nil` is asked for.
    static func limited(_ issuer: LocalIssuer, ttl: Int = 300, jti: String? = UUID().uuidString) throws -> String {
        try issuer.mint(appId: appId, ttl: ttl, jti: jti)
    }

    static func request(_ path: String, token: String) -> String {
        "GET \(path) HTTP/1.1\r\nHost: api\r\nX-Firebase-AppCheck: \(token)\r\n\r\n"
    }

    static func send(port: UInt16, _ path: String = "/redeem", token: String) throws -> ReplayAnswer {
        ReplayAnswer(try RawHTTPClient.roundTrip(port: port, request(path, token: token)))
    }

    /// Opens `count` connections (spread over `ports`) first, then sends one request with `token` on each from
    /// several threads at once, then reads every answer.
    static func race(ports: [UInt16], token: String, count: Int = 50) throws -> [ReplayAnswer] {
        var clients: [RawHTTPClient] = []
        for i in 0..<count { clients.append(try RawHTTPClient(port: ports[i % ports.count], timeout: 10)) }
        let box = UncheckedBox(value: clients)
        let bytes = Array(request("/redeem", token: token).utf8)
        let sendErrors = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: count) { i in
            do { try box.value[i].send(bytes) } catch { sendErrors.add(1, ordering: .relaxed) }
        }
        guard sendErrors.load(ordering: .relaxed) == 0 else { throw HarnessError("send failed on some connections") }
        let answers = AnswerList()
        let readErrors = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: count) { i in
            do { answers.append(ReplayAnswer(try box.value[i].readResponse())) } catch {
                readErrors.withLock { $0.append("\(error)") }
            }
        }
        let errors = readErrors.withLock { $0 }
        guard errors.isEmpty else { throw HarnessError("no answer on \(errors.count) connections: \(errors.first!)") }
        return answers.all
    }

    /// `appcheck_replay_store_total{result=…}` from the admin listener.
    static func storeMetric(adminPort: UInt16, _ result: String) throws -> Int? {
        let text = try RawHTTPClient.roundTrip(port: adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        let prefix = "appcheck_replay_store_total{result=\"\(result)\"} "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return nil }
        return Int(line.dropFirst(prefix.count))
    }

    /// `/readyz` status on `adminPort` (nil when it does not answer).
    static func readyStatus(adminPort: UInt16) -> Int? {
        try? RawHTTPClient.roundTrip(port: adminPort, "GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n").status
    }

    /// Polls `condition` every 20 ms until it holds or `seconds` pass.
    static func eventually(_ seconds: Double, _ condition: () throws -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            if (try? condition()) == true { return true }
            usleep(20_000)
        } while Date() < deadline
        return (try? condition()) == true
    }

    /// The in-process gateway's memory store, reached through a worker's replay client.
    static func memoryStore(of h: GatewayHarness) -> MemoryReplayStore? {
        let workers = Mirror(reflecting: h.server).children.first { $0.label == "workers" }?.value as? [Worker]
        return (workers?.first?.replayClient as? MemoryReplayClient)?.store
    }

    /// Base64url texts that decode to the same bytes as `part` but differ from it: unused trailing bits set
    /// (when the length leaves some), `=` padding (when the length is not a multiple of 4), and the standard
    /// alphabet (`+` `/`) in place of `-` `_` (when the text has any).
    static func reencodings(of part: String) -> [(String, String)] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var out: [(String, String)] = []
        var chars = Array(part)
        let rem = chars.count % 4
        if rem == 2 || rem == 3, let last = chars.last, let idx = alphabet.firstIndex(of: last) {
            // rem 2: the last char carries 2 data bits (4 unused); rem 3: 4 data bits (2 unused).
            chars[chars.count - 1] = alphabet[idx ^ 1]
            out.append(("non-canonical trailing bits", String(chars)))
        }
        if rem != 0 { out.append(("padded", part + String(repeating: "=", count: 4 - rem))) }
        if part.contains("-") || part.contains("_") {
            out.append(("standard alphabet", part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")))
        }
        return out
    }

    /// Every re-encoding of one part of `token` (0 header, 1 payload, 2 signature), each named.
    static func reencodedTokens(_ token: String) -> [(String, String)] {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var out: [(String, String)] = []
        for (i, name) in ["header", "payload", "signature"].enumerated() {
            for (how, text) in reencodings(of: parts[i]) {
                var p = parts
                p[i] = text
                out.append(("\(name) \(how)", p.joined(separator: ".")))
            }
        }
        return out
    }
}

@Suite(.serialized) struct ReplayEndToEndTests {
    /// First use forwarded, second refused with 401 `app_check_token_reused` / `reused`, never forwarded;
    /// with and without `jti` (the two key derivations of docs/behaviour.md, replay protection).
    @Test(arguments: ReplayStoreKind.allCases)
    func firstUseIsForwardedSecondIsRefusedAsReused(_ kind: ReplayStoreKind) throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(kind)
        defer { backend.stop(); issuer.stop() }
        let h = try ReplayE2E.harness(issuer, backend)
        defer { h.stop() }
        for jti in [UUID().uuidString, nil] {
            let token = try ReplayE2E.limited(issuer, jti: jti)
            let before = h.upstream.requestCount
            let first = try ReplayE2E.send(port: h.port, token: token)
            #expect(first.status == 200, "\(kind) jti=\(jti ?? "none"): \(first)")
            #expect(h.upstream.receivedHeads.last?.contains("X-AppCheck-Status: verified\n") == true)
            for _ in 0..<3 {
                let again = try ReplayE2E.send(port: h.port, token: token)
                #expect(again.isReused, "\(kind) jti=\(jti ?? "none"): \(again)")
            }
            #expect(h.upstream.requestCount == before + 1, "\(kind): a replay reached the upstream")
        }
        #expect(try backend.entryCount(h) == 2)
        #expect(try ReplayE2E.storeMetric(adminPort: h.adminPort, "consumed") == 2)
        #expect(try ReplayE2E.storeMetric(adminPort: h.adminPort, "reused") == 6)
        #expect(try ReplayE2E.storeMetric(adminPort: h.adminPort, "error") == 0)
        #expect(h.logLines().contains { $0.contains("\"reason\":\"reused\"") && $0.contains("\"status\":401") })
    }

    /// 50 connections opened first, then one request each with the same token sent from several threads on a
    /// two-loop gateway: exactly one 200, 49 × 401 reused, one upstream request.
    @Test(arguments: ReplayStoreKind.allCases)
    func fiftyConcurrentUsesOfOneTokenGetExactlyOne200(_ kind: ReplayStoreKind) throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(kind)
        defer { backend.stop(); issuer.stop() }
        // A generous store timeout: this test is about atomicity, not latency on two shared cores.
        let h = try ReplayE2E.harness(issuer, backend, threads: 2, timeout: "5s")
        defer { h.stop() }
        for round in 0..<3 {
            let answers = try ReplayE2E.race(ports: [h.port], token: try ReplayE2E.limited(issuer, jti: round == 2 ? nil : UUID().uuidString))
            #expect(answers.count == 50)
            #expect(answers.filter { $0.status == 200 }.count == 1, "\(kind) round \(round): \(answers)")
            #expect(answers.filter(\.isReused).count == 49, "\(kind) round \(round): \(answers)")
            #expect(h.upstream.requestCount == round + 1)
        }
        #expect(try ReplayE2E.storeMetric(adminPort: h.adminPort, "consumed") == 3)
        #expect(try ReplayE2E.storeMetric(adminPort: h.adminPort, "reused") == 147)
    }

    /// Entries leave the store once `exp + clock_skew` has passed: the count goes back down to the entries
    /// that are still alive (memory: the gateway's store object; SQLite: the file; Redis: `DBSIZE`).
    @Test(arguments: ReplayStoreKind.allCases)
    func expiryFreesEntries(_ kind: ReplayStoreKind) throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(kind)
        defer { backend.stop(); issuer.stop() }
        let h = try ReplayE2E.harness(issuer, backend, appCheck: "  clock_skew: 0s")
        defer { h.stop() }
        let keeper = try ReplayE2E.limited(issuer)
        #expect(try ReplayE2E.send(port: h.port, token: keeper).status == 200)
        var short: [String] = []
        for i in 0..<5 {
            let t = try ReplayE2E.limited(issuer, ttl: 3, jti: i == 4 ? nil : UUID().uuidString)
            short.append(t)
            let a = try ReplayE2E.send(port: h.port, token: t)
            #expect(a.status == 200, "\(kind): \(a)")
        }
        #expect(try backend.entryCount(h) == 6)
        for t in short { #expect(try ReplayE2E.send(port: h.port, token: t).isReused) }
        // The short tokens expire after 3 s (no skew); SQLite prunes every 5 s, memory sweeps every second.
        let freed = ReplayE2E.eventually(20) { try backend.entryCount(h) == 1 }
        #expect(freed, "\(kind): \(String(describing: try? backend.entryCount(h))) entries left, expected 1")
        // Expired tokens are refused as expired (never consumed again); the live one is still a replay.
        let late = try ReplayE2E.send(port: h.port, token: short[0])
        #expect(late.status == 401 && late.reason == "expired", "\(kind): \(late)")
        #expect(try ReplayE2E.send(port: h.port, token: keeper).isReused)
        #expect(try backend.entryCount(h) == 1)
    }

    /// A session token (1 h) on a replay route is `limited_use_required` and is not consumed: it keeps working
    /// on an ordinary enforce route, and asking the replay route again gives the same answer (not `reused`).
    /// The bound is inclusive: a token living exactly `limited_use_max_ttl` is accepted.
    @Test(arguments: ReplayStoreKind.allCases)
    func sessionTokenIsLimitedUseRequiredAndNotConsumed(_ kind: ReplayStoreKind) throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(kind)
        defer { backend.stop(); issuer.stop() }
        let h = try ReplayE2E.harness(issuer, backend, replayExtra: "  limited_use_max_ttl: 5m")
        defer { h.stop() }
        let session = try issuer.mint(appId: ReplayE2E.appId, ttl: 3600)
        for _ in 0..<2 {
            let a = try ReplayE2E.send(port: h.port, token: session)
            #expect(a.status == 401 && a.error == "app_check_token_invalid" && a.reason == "limited_use_required", "\(kind): \(a)")
        }
        #expect(h.upstream.requestCount == 0)
        #expect(try backend.entryCount(h) == 0)
        #expect(try ReplayE2E.storeMetric(adminPort: h.adminPort, "consumed") == 0)
        for _ in 0..<2 { #expect(try ReplayE2E.send(port: h.port, "/e/orders", token: session).status == 200) }
        // A session token with a jti is no different.
        let sessionJti = try issuer.mint(appId: ReplayE2E.appId, ttl: 3600, jti: UUID().uuidString)
        #expect(try ReplayE2E.send(port: h.port, token: sessionJti).reason == "limited_use_required")
        #expect(try ReplayE2E.send(port: h.port, "/e/x", token: sessionJti).status == 200)
        // Boundary: 301 s is too long, 300 s is fine (and then single-use).
        #expect(try ReplayE2E.send(port: h.port, token: try ReplayE2E.limited(issuer, ttl: 301)).reason == "limited_use_required")
        let exact = try ReplayE2E.limited(issuer, ttl: 300)
        #expect(try ReplayE2E.send(port: h.port, token: exact).status == 200)
        #expect(try ReplayE2E.send(port: h.port, token: exact).isReused)
        #expect(try backend.entryCount(h) == 1)
    }

    /// The same token bytes written as different base64url text (unused trailing bits set, `=` padding, the
    /// standard alphabet) are either refused as `malformed` or recognised as the same token (`reused`); across
    /// the canonical token and all its re-encodings, at most one request is ever accepted. Both orders (the
    /// canonical text first, the re-encodings first), with and without `jti`.
    @Test(arguments: ReplayStoreKind.allCases)
    func reencodedTokenIsNeverAcceptedTwice(_ kind: ReplayStoreKind) throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(kind)
        defer { backend.stop(); issuer.stop() }
        let h = try ReplayE2E.harness(issuer, backend)
        defer { h.stop() }
        for useJti in [true, false] {
            for canonicalFirst in [true, false] {
                // Tokens without jti minted in the same second are identical: vary the lifetime.
                let token = try ReplayE2E.limited(issuer, ttl: canonicalFirst ? 300 : 299, jti: useJti ? UUID().uuidString : nil)
                let variants = ReplayE2E.reencodedTokens(token)
                let sigVariants = variants.filter { $0.0.hasPrefix("signature") }
                #expect(sigVariants.count >= 2, "expected at least trailing-bit and padded signature variants: \(variants.map(\.0))")
                let label = "\(kind) jti=\(useJti) canonicalFirst=\(canonicalFirst)"
                var accepted = 0
                var log: [String] = []
                let before = h.upstream.requestCount
                if canonicalFirst {
                    let a = try ReplayE2E.send(port: h.port, token: token)
                    #expect(a.status == 200, "\(label): \(a)")
                    if a.status == 200 { accepted += 1 }
                }
                for (name, text) in variants {
                    #expect(text != token)
                    let a = try ReplayE2E.send(port: h.port, token: text)
                    log.append("\(name) → \(a)")
                    if a.status == 200 { accepted += 1; continue }
                    let malformed = a.status == 401 && a.error == "app_check_token_invalid" && a.reason == "malformed"
                    #expect(a.isReused || malformed, "\(label) \(name): \(a)")
                }
                let last = try ReplayE2E.send(port: h.port, token: token)
                if last.status == 200 { accepted += 1 }
                #expect(accepted == 1, "\(label): accepted \(accepted) times; canonical last: \(last); \(log)")
                #expect(h.upstream.requestCount == before + accepted)
            }
        }
    }

    /// Two different tokens with the same `sub` and `jti` are one token for replay purposes (the replay key of docs/behaviour.md).
    @Test func sameJtiInAnotherTokenIsReused() throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(.memory)
        defer { backend.stop(); issuer.stop() }
        let h = try ReplayE2E.harness(issuer, backend)
        defer { h.stop() }
        let jti = UUID().uuidString
        let a = try ReplayE2E.limited(issuer, ttl: 300, jti: jti)
        let b = try ReplayE2E.limited(issuer, ttl: 299, jti: jti)
        #expect(a != b)
        #expect(try ReplayE2E.send(port: h.port, token: a).status == 200)
        #expect(try ReplayE2E.send(port: h.port, token: b).isReused)
    }
}

/// The gateway hands a verified token's replay key to the memory store in place (`ReplayKey(words:)`) and to the async
/// stores as bytes (`SHA256Digest.Value.bytes`): the two must name the same 32 bytes, or one token would have two keys.
@Suite struct ReplayKeyHandOverTests {
    @Test func theWordsAndTheBytesOfADigestAreOneKey() throws {
        for text in ["", "1:123456789012:ios:abcdef0123456789\nJ1", String(repeating: "x", count: 200)] {
            let digest = Array(text.utf8).withUnsafeBytes { SHA256Digest.value($0) }
            #expect(digest.bytes == SHA256Digest.hash(Array(text.utf8)))
            let inPlace = ReplayKey(words: digest.words)
            #expect(inPlace == ReplayKey(digest.bytes))
            #expect(inPlace.bytes == digest.bytes)
            #expect(inPlace.firstByte == digest.bytes[0])
        }
    }
}
