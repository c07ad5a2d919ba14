import EventLoop
import Foundation
@testable import Gateway
@testable import GatewayConfig
import Glibc
import JSONLog
@testable import ReplayStores
import TestSupport
import Testing

/// ACL users (`redis://user:password@`) and TLS (`rediss://…?ca_file=`) against a real `redis-server`.
@Suite(.serialized) struct ReplayRedisAccessTests {
    /// The ACL docs/replay.md gives a gateway user: only its key prefix and the commands it needs.
    static let gatewayACL = "gateway on >gw-pass ~appcheck:replay:* +eval +set +get +info +ping +select +cluster|slots +asking"

    static func aclServer() throws -> RedisServerProcess {
        try RedisServerProcess(extraArguments: ["--user"] + gatewayACL.split(separator: " ").map(String.init))
    }

    /// An ACL user with just the documented permissions authenticates (`AUTH user password`), consumes once,
    /// and its keys carry the prefix; the same URL with a wrong password or an unknown user never connects.
    @Test func aclUserWithTheDocumentedPermissions() throws {
        let server = try Self.aclServer()
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        #expect(try server.cli(["ACL", "WHOAMI"]) == "default")
        let (s, c) = try ReplayRedis.connect(server, t, url: "redis://gateway:gw-pass@127.0.0.1:\(server.port)/0")
        defer { s.close() }
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: k) == .reused)
        #expect(try server.cli(["EXISTS", ReplayRedis.keyName("appcheck:replay:", k)]) == "1")
        // The user really is restricted: outside its prefix Redis refuses it.
        let denied = try server.cli(["--user", "gateway", "--pass", "gw-pass", "SET", "other", "1"])
        #expect(denied.contains("NOPERM"), "\(denied)")
        #expect(s.counters.errors == 0)
    }

    @Test(arguments: ["redis://gateway:wrong@127.0.0.1:PORT", "redis://nobody:gw-pass@127.0.0.1:PORT"])
    func wrongCredentialsAreNotReadyAndFailClosed(_ template: String) throws {
        let server = try Self.aclServer()
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        let s = try RedisReplayStore(url: template.replacingOccurrences(of: "PORT", with: String(server.port)),
                                     keyPrefix: "appcheck:replay:", timeout: 0.5, logSink: LogSink(fd: 2, level: .error),
                                     heartbeatInterval: 0.5)
        defer { s.close() }
        let c = s.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s.readinessProblem()?.contains("AUTH failed: WRONGPASS") == true },
                "\(s.readinessProblem() ?? "ready")")
        for _ in 0..<3 {
            let r = ReplayTest.consumeOne(c, on: t.loop, key: ReplayTest.randomKey())
            #expect(ReplayTest.isUnavailable(r), "\(String(describing: r))")
        }
        #expect(try server.cli(["DBSIZE"]) == "0")
    }

    /// Through the gateway: a wrong ACL password keeps /readyz at 503 naming the AUTH failure, every request
    /// on the replay route answers 503 replay_store_unavailable (never forwarded), and the ops log has one
    /// error line with Redis's answer and never the password.
    @Test func wrongPasswordThroughTheGateway() throws {
        let issuer = try LocalIssuer()
        let backend = try ReplayBackend(.memory)
        let server = try Self.aclServer()
        defer { backend.stop(); issuer.stop(); server.stop() }
        let h = try GatewayHarness {
            ReplayE2E.config(upstream: $0, issuer: issuer, backend: backend)
                .replacingOccurrences(of: "  store: memory", with: "  store: redis\n  redis_url: redis://gateway:not-the-pass@127.0.0.1:\(server.port)/0")
        }
        defer { h.stop() }
        // Ready but for the store: the key set is loaded, Redis refuses the password.
        #expect(ReplayE2E.eventually(10) {
            let problems = h.server.readinessProblems()
            return problems.count == 1 && problems[0].hasPrefix("replay_store: redis:") && problems[0].contains("AUTH failed: WRONGPASS")
        }, "\(h.server.readinessProblems())")
        let ready = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(ready.status == 503 && ready.bodyText.contains("AUTH failed: WRONGPASS"), "\(ready.bodyText)")
        for _ in 0..<3 {
            let a = try ReplayE2E.send(port: h.port, token: try ReplayE2E.limited(issuer))
            #expect(a.isStoreUnavailable, "\(a)")
        }
        #expect(h.upstream.requestCount == 0)
        let log = try String(contentsOfFile: h.logPath, encoding: .utf8)
        let lines = log.split(separator: "\n").filter { $0.contains("replay store handshake failed") }
        #expect(!lines.isEmpty, "\(log.suffix(2000))")
        #expect(lines.allSatisfy { $0.contains("\"severity\":\"ERROR\"") && $0.contains("WRONGPASS") }, "\(lines)")
        #expect(!log.contains("not-the-pass"))
    }

    /// `rediss://` with the test CA: TLS with chain and IP-address checks, then the usual consume/reuse; the
    /// same server through a wrong CA, or a certificate for another name, never connects (fail closed).
    @Test func tlsWithCAFileAndNameChecks() throws {
        let pki = try TestPKI()
        let server = try RedisServerProcess(tls: .init(cert: pki.cert, key: pki.key, ca: pki.caCert))
        let t = try ReplayTestLoop()
        defer { t.stop(); server.stop() }
        #expect(server.url.hasPrefix("rediss://"))
        let (s, c) = try ReplayRedis.connect(server, t)
        defer { s.close() }
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(c, on: t.loop, key: k) == .reused)
        // Pipelined traffic over TLS.
        let keys = (0..<200).map { _ in ReplayTest.randomKey() }
        #expect(ReplayTest.consume(c, on: t.loop, keys: keys + keys, expiresAt: ReplayTest.later())
                == Array(repeating: .consumed, count: 200) + Array(repeating: .reused, count: 200))
        // By DNS name (the certificate names localhost too).
        let (s2, c2) = try ReplayRedis.connect(server, t, url: "rediss://localhost:\(server.port)?ca_file=\(pki.caCert)")
        defer { s2.close() }
        #expect(ReplayTest.consumeOne(c2, on: t.loop, key: k) == .reused)

        let otherCA = try TestPKI()
        let wrongName = try TestPKI(subjectAltName: "DNS:redis.example")
        let bad = [
            ("rediss://127.0.0.1:\(server.port)?ca_file=\(otherCA.caCert)", "certificate verify failed"),
            // The server's real certificate, but the gateway trusts only the system store.
            ("rediss://127.0.0.1:\(server.port)", "certificate verify failed"),
        ]
        for (url, fragment) in bad {
            let s3 = try RedisReplayStore(url: url, keyPrefix: "appcheck:replay:", timeout: 0.5,
                                          logSink: LogSink(fd: 2, level: .error), heartbeatInterval: 0.5)
            defer { s3.close() }
            let c3 = s3.makeClient(for: t.loop)
            #expect(ReplayTest.eventually { s3.readinessProblem()?.contains(fragment) == true }, "\(url): \(s3.readinessProblem() ?? "ready")")
            #expect(ReplayTest.isUnavailable(ReplayTest.consumeOne(c3, on: t.loop, key: ReplayTest.randomKey())))
        }
        // A certificate for another name, from the trusted CA.
        let server2 = try RedisServerProcess(tls: .init(cert: wrongName.cert, key: wrongName.key, ca: wrongName.caCert))
        defer { server2.stop() }
        let s4 = try RedisReplayStore(url: "rediss://127.0.0.1:\(server2.port)?ca_file=\(wrongName.caCert)",
                                      keyPrefix: "appcheck:replay:", timeout: 0.5, logSink: LogSink(fd: 2, level: .error),
                                      heartbeatInterval: 0.5)
        defer { s4.close() }
        let c4 = s4.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s4.readinessProblem()?.contains("certificate verify failed") == true },
                "\(s4.readinessProblem() ?? "ready")")
        #expect(ReplayTest.isUnavailable(ReplayTest.consumeOne(c4, on: t.loop, key: ReplayTest.randomKey())))
        #expect(try server2.cli(["DBSIZE"]) == "0")
    }

    /// A plain client against the TLS port, and TLS against a plain server: never ready, fail closed.
    @Test func tlsMismatchFailsClosed() throws {
        let plain = try RedisServerProcess()
        let t = try ReplayTestLoop()
        defer { t.stop(); plain.stop() }
        let pki = try TestPKI()
        let s = try RedisReplayStore(url: "rediss://127.0.0.1:\(plain.port)?ca_file=\(pki.caCert)", keyPrefix: "p:",
                                     timeout: 0.5, logSink: LogSink(fd: 2, level: .error), heartbeatInterval: 0.5)
        defer { s.close() }
        let c = s.makeClient(for: t.loop)
        // Redis reads the ClientHello as the start of an inline command and waits: the connect deadline ends it.
        #expect(ReplayTest.eventually { s.readinessProblem()?.contains("connections down") == true }, "\(s.readinessProblem() ?? "ready")")
        #expect(ReplayTest.isUnavailable(ReplayTest.consumeOne(c, on: t.loop, key: ReplayTest.randomKey())))
        #expect(try plain.cli(["DBSIZE"]) == "0")

        let tls = try RedisServerProcess(tls: .init(cert: pki.cert, key: pki.key, ca: pki.caCert))
        defer { tls.stop() }
        let s2 = try RedisReplayStore(url: "redis://127.0.0.1:\(tls.port)", keyPrefix: "p:", timeout: 0.5,
                                      logSink: LogSink(fd: 2, level: .error), heartbeatInterval: 0.5)
        defer { s2.close() }
        let c2 = s2.makeClient(for: t.loop)
        #expect(ReplayTest.eventually { s2.readinessProblem()?.contains("connections down") == true }, "\(s2.readinessProblem() ?? "ready")")
        #expect(ReplayTest.isUnavailable(ReplayTest.consumeOne(c2, on: t.loop, key: ReplayTest.randomKey())))
    }

    /// Store creation refuses what it cannot use: an unreadable ca_file, a cluster prefix with braces.
    @Test func storeRefusesUnusableSettings() {
        #expect(throws: ReplayStoreError("replay.redis_url: ca_file /nonexistent/ca.pem is not readable")) {
            _ = try RedisReplayStore(url: "rediss://127.0.0.1:6380?ca_file=/nonexistent/ca.pem", keyPrefix: "p:",
                                     timeout: 0.5, logSink: LogSink(fd: 2))
        }
    }
}

/// `replay.redis_url` errors carry the file, line and column of the value (docs/configuration.md), and say what is wrong.
@Suite struct RedisURLConfigTests {
    static let tail = ConfigFixture.minimal

    @Test(arguments: [
        ("ftp://cache:6379", "unknown scheme \"ftp\""),
        ("redis://cache:70000", "bad port \"70000\""),
        ("redis://:secret@:6379", "missing host"),
        ("rediss://cache?ca_file=/nonexistent/redis-ca.pem", "ca_file /nonexistent/redis-ca.pem is not readable"),
        ("redis://cache?ca_file=/etc/hosts", "ca_file needs a TLS scheme"),
        ("redis+cluster://a:7000,b:notaport", "bad port \"notaport\""),
        ("redis+cluster://a:7000/3", "a cluster has only database 0"),
    ])
    func badURLIsAnErrorAtItsValue(_ url: String, _ fragment: String) {
        let yaml = "replay:\n  store: redis\n  redis_url: \"\(url)\"\n" + Self.tail
        switch ConfigLoader.load(yaml: yaml, path: "gw.yaml", environment: [:], cores: 2) {
        case .success:
            Issue.record("\(url) was accepted")
        case .failure(let errors):
            #expect(errors.errors.count == 1, "\(errors)")
            guard let e = errors.errors.first else { return }
            #expect((e.file, e.line, e.column) == ("gw.yaml", 3, 14), "\(e)")
            #expect(e.message.contains(fragment), "\(e)")
            #expect(!e.message.contains("secret"))
        }
    }

    @Test func goodURLsLoad() throws {
        let pki = try TestPKI()
        for url in ["redis://u:p@cache:6380/2", "rediss://cache?ca_file=\(pki.caCert)", "redis+cluster://a:7000,b:7001",
                    "rediss+cluster://:pw@a:7000?ca_file=\(pki.caCert)"] {
            let yaml = "replay:\n  store: redis\n  redis_url: \"\(url)\"\n" + Self.tail
            guard case .success(let s) = ConfigLoader.load(yaml: yaml, path: "gw.yaml", environment: [:], cores: 2) else {
                Issue.record("\(url) refused")
                continue
            }
            #expect(s.replay.redisURL == url)
        }
    }
}
