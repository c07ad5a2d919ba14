import Foundation
import Gateway
import Glibc
import Testing
import TestSupport

/// `appcheck-gateway healthcheck` follows the running server: `serve` writes its bound admin address to
/// `$APPCHECK_GATEWAY_ADMIN_FILE` and `healthcheck` without `--config` probes it (the container image's
/// HEALTHCHECK), so a server started with `--config` elsewhere, or with admin port 0, is still probed right.
@Suite(.serialized) struct HealthcheckCommandTests {
    /// Runs `healthcheck` with `environment` added to the test's own, killed after 15 s.
    static func healthcheck(_ environment: [String: String], _ arguments: [String] = []) throws -> ProcessResult {
        try BoundedCommand.run("/usr/bin/env", environment.map { "\($0.key)=\($0.value)" } + [Run.gatewayBinary, "healthcheck"] + arguments,
                               timeout: 15)
    }

    @Test func healthcheckProbesTheAddressTheServerWrote() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("healthcheck-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("elsewhere.yaml").path
        try GatewayHarness.config(upstream: "http://127.0.0.1:9", routes: """
              - name: a
                prefix: /
                upstream: api
                enforcement: off
            """, appCheck: "  jwks:\n    url: \(issuer.jwksURL)").write(toFile: config, atomically: true, encoding: .utf8)
        let adminFile = dir.appendingPathComponent("admin").path
        // What the image sets, except that the default configuration does not exist: only the file can help.
        let env = ["APPCHECK_GATEWAY_ADMIN_FILE": adminFile, "APPCHECK_GATEWAY_CONFIG": dir.appendingPathComponent("missing.yaml").path]
        var serverEnv = ProcessInfo.processInfo.environment
        for (k, v) in env { serverEnv[k] = v }
        let gw = try GatewayProcess(arguments: ["serve", "--config", config], environment: serverEnv)
        defer { if gw.process.isRunning { kill(gw.process.processIdentifier, SIGKILL) }; _ = gw.waitForExit(timeout: 10) }
        let line = try gw.waitForLine(containing: "\"message\":\"listening\"", timeout: 30)
        let obj = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let admin = try #require(obj["admin"] as? String)
        #expect(!admin.hasSuffix(":0"), "admin port 0 resolved: \(admin)")

        // Ready once the key set is in: exit 0 and the /readyz answer on stdout.
        let deadline = Date().addingTimeInterval(20)
        var last = try Self.healthcheck(env)
        while last.status != 0 && Date() < deadline {
            usleep(50_000)
            last = try Self.healthcheck(env)
        }
        #expect(last.status == 0, "healthcheck: \(last.stdout) \(last.stderr)")
        #expect(last.stdout.hasPrefix("200 "), "\(last.stdout)")
        let written = try String(contentsOfFile: adminFile, encoding: .utf8)
        #expect(written == admin + "\n", "file \(written) vs listening line \(admin)")

        // Without the file the command reads the (missing) default configuration and fails; with --config it
        // reads that file's admin_listen (port 0 there, so it cannot reach the server) and fails too.
        let noFile = try Self.healthcheck(["APPCHECK_GATEWAY_ADMIN_FILE": "", "APPCHECK_GATEWAY_CONFIG": env["APPCHECK_GATEWAY_CONFIG"]!])
        #expect(noFile.status == 1 && noFile.stderr.contains("missing.yaml"), "\(noFile.stderr)")
        let explicit = try Self.healthcheck(env, ["--config", config])
        #expect(explicit.status == 1, "\(explicit.stdout) \(explicit.stderr)")

        // A clean stop removes the file: a stale address cannot answer for a later server.
        gw.signal(SIGTERM)
        #expect(gw.waitForExit(timeout: 15) == 0)
        #expect(!FileManager.default.fileExists(atPath: adminFile))
        let afterStop = try Self.healthcheck(env)
        #expect(afterStop.status == 1)
    }
}
