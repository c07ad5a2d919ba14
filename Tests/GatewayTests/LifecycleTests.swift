import AppCheck
import Foundation
import Gateway
import GatewayTools
import Glibc
import Testing
import TestSupport

/// Signals and the command line, against the built binary (README, Commands; docs/configuration.md reload and drain).
@Suite struct LifecycleTests {
    static func config(upstream: String, routes: [String], extra: String = "") -> String {
        GatewayHarness.config(upstream: upstream, routes: routes.map { """
              - name: r\($0.dropFirst())
                path: \($0)
                upstream: api
                enforcement: off
            """ }.joined(separator: "\n"), limits: ["shutdown_grace": "5s"], top: extra)
    }

    static func tempFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gw-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func status(_ port: UInt16, _ path: String) -> Int? {
        (try? RawHTTPClient.roundTrip(port: port, "GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n"))?.status
    }

    @Test func sighupReloadsAValidFileAndKeepsTheOldOneOnErrors() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let url = "http://127.0.0.1:\(upstream.address.port)"
        let path = try Self.tempFile(Self.config(upstream: url, routes: ["/a"]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gw = try GatewayProcess.serve(config: path)
        #expect(Self.status(gw.port, "/a") == 200)
        #expect(Self.status(gw.port, "/b") == 404)

        try Self.config(upstream: url, routes: ["/a", "/b"]).write(toFile: path, atomically: true, encoding: .utf8)
        var seen = gw.lines.count
        gw.signal(SIGHUP)
        try gw.waitForLine(containing: "configuration reloaded", after: seen)
        #expect(Self.status(gw.port, "/b") == 200)

        try "server:\n  listn: []\nroutes: 5\n".write(toFile: path, atomically: true, encoding: .utf8)
        seen = gw.lines.count
        gw.signal(SIGHUP)
        let refusal = try gw.waitForLine(containing: "reload refused", after: seen)
        #expect(refusal.contains("\(path):2:3: unknown key 'listn'"))
        #expect(Self.status(gw.port, "/b") == 200)
        #expect(Self.status(gw.port, "/a") == 200)

        gw.signal(SIGTERM)
        #expect(gw.waitForExit(timeout: 10) == 0)
    }

    @Test func sigtermFinishesInFlightRequestsRefusesNewOnesAndExitsZero() throws {
        let upstream = try SampleUpstream()
        defer { upstream.stop() }
        let path = try Self.tempFile(Self.config(upstream: "http://127.0.0.1:\(upstream.address.port)", routes: ["/delay/800"]))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gw = try GatewayProcess.serve(config: path)
        let client = try RawHTTPClient(port: gw.port)
        try client.send("GET /delay/800 HTTP/1.1\r\nHost: a\r\n\r\n")
        let deadline = Date().addingTimeInterval(5)
        while upstream.requestCount == 0 && Date() < deadline { usleep(5_000) }
        #expect(upstream.requestCount == 1)
        gw.signal(SIGTERM)
        try gw.waitForLine(containing: "draining")
        // New connections are refused while the in-flight request finishes.
        #expect(throws: (any Error).self) { _ = try RawHTTPClient(port: gw.port) }
        let r = try client.readResponse()
        #expect(r.status == 200)
        #expect(r.header("Connection") == "close")
        #expect(gw.waitForExit(timeout: 10) == 0)
        // Exited once the request was done, not at the end of the 5 s grace: nothing was left to drop.
        #expect(gw.lines.contains { $0.contains("\"message\":\"stopped\"") && $0.contains("\"dropped_connections\":0") },
                "\(gw.lines.suffix(3))")
    }

    @Test func checkConfigPrintsRoutesOrEveryErrorWithPosition() throws {
        let good = try Self.tempFile(Self.config(upstream: "http://127.0.0.1:9", routes: ["/a", "/b"]))
        defer { try? FileManager.default.removeItem(atPath: good) }
        let ok = try Run.command(Run.gatewayBinary, ["check-config", "--config", good])
        #expect(ok.status == 0)
        #expect(ok.stdout.contains("ra") && ok.stdout.contains("rb"))
        let bad = try Self.tempFile("server:\n  threads: many\napp_check: {}\nupstreams: {}\nroutes: []\n")
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let r = try Run.command(Run.gatewayBinary, ["check-config", "--config", bad])
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count >= 2)
        #expect(lines.allSatisfy { $0.hasPrefix("\(bad):") })
        #expect(r.stderr.contains("\(bad):2:12:"))
    }

    @Test func everyShippedConfigIsValid() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var env = ProcessInfo.processInfo.environment
        env["FIREBASE_PROJECT_NUMBER"] = "123456789012"
        // The files the demo makes at start: an issuer signing key, roots for the simulated iPhone's CA and receipt CA,
        // and a DeviceCheck key for the receipt refresher (its stand-in for Apple's data server is not asked here).
        let pki = try TestPKI()
        let issuerKey = pki.directory + "/issuer.pem"
        try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: issuerKey, atomically: true, encoding: .utf8)
        env["DEMO_ISSUER_KEY"] = issuerKey
        env["DEMO_APPATTEST_ROOT"] = pki.caCert
        env["DEMO_RECEIPT_ROOT"] = pki.caCert
        let deviceCheckKey = pki.directory + "/devicecheck.p8"
        try ES256PrivateKey.generate().pemRepresentation().write(toFile: deviceCheckKey, atomically: true, encoding: .utf8)
        env["DEMO_DEVICECHECK_KEY"] = deviceCheckKey
        env["DEMO_APPLE_DATA_URL"] = "http://127.0.0.1:9"
        for name in ["gateway.example.yaml", "demo.yaml"] {
            let path = root.appendingPathComponent("Config/\(name)").path
            let r = try Run.command(Run.gatewayBinary, ["check-config", "--config", path], environment: env)
            #expect(r.status == 0, "\(name): \(r.stderr)")
        }
    }

    @Test func commandErrorsAreOneReadableLineAndNonZero() throws {
        let missing = try Run.command(Run.gatewayBinary, ["serve", "--config", "/nonexistent/gw.yaml"])
        #expect(missing.status == 1)
        #expect(missing.stderr.trimmingCharacters(in: .whitespacesAndNewlines) == "/nonexistent/gw.yaml:1:1: cannot read file: No such file or directory")
        let busy = try Self.tempFile(Self.config(upstream: "http://127.0.0.1:9", routes: ["/a"]).replacingOccurrences(of: "127.0.0.1:0\"]", with: "203.0.113.1:80\"]"))
        defer { try? FileManager.default.removeItem(atPath: busy) }
        let bind = try Run.command(Run.gatewayBinary, ["serve", "--config", busy], timeout: 20)
        #expect(bind.status == 1)
        #expect(bind.stderr.contains("cannot start"))
    }
}
