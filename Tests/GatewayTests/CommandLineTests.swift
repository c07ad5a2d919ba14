import AppCheck
import Foundation
import Gateway
import GatewayTools
import Glibc
import Issuer
import TestSupport
import Testing

/// The small commands as a newcomer meets them, against the built binary: `--version`, `keygen` defaults,
/// `mint --ttl`, and `demo` started from a directory that is not the repository.
@Suite(.serialized) struct CommandLineTests {
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// The claims of a compact JWS, decoded without verification (the test minted it).
    static func claims(_ token: String) throws -> [String: Any] {
        let parts = token.split(separator: ".")
        try #require(parts.count == 3, "\(token)")
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test func versionPrintsOneLine() throws {
        let r = try Run.command(Run.gatewayBinary, ["--version"])
        #expect(r.status == 0, "\(r.stderr)")
        let version = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!version.isEmpty && !version.contains("\n") && version.first?.isNumber == true, "\(r.stdout)")
    }

    /// With no `--config` and no `$APPCHECK_GATEWAY_CONFIG`, `serve` reads `Config/gateway.yaml` in the working
    /// directory; when that is missing the error says what was read and how to start one.
    @Test func missingDefaultConfigSaysHowToMakeOne() throws {
        let empty = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: empty) }
        var env = ProcessInfo.processInfo.environment
        env["APPCHECK_GATEWAY_CONFIG"] = nil
        let binary = URL(fileURLWithPath: Run.gatewayBinary).standardizedFileURL.path
        let r = try Run.command("/bin/sh", ["-c", "cd '\(empty.path)' && exec '\(binary)' check-config"], environment: env)
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == "Config/gateway.yaml:1:1: cannot read file: No such file or directory", "\(r.stderr)")
        #expect(lines.count == 2 && lines[1].contains("cp Config/gateway.example.yaml Config/gateway.yaml"), "\(r.stderr)")

        env["APPCHECK_GATEWAY_CONFIG"] = "/nonexistent/from-env.yaml"
        let named = try Run.command(Run.gatewayBinary, ["check-config"], environment: env)
        #expect(named.status == 1)
        #expect(named.stderr == "/nonexistent/from-env.yaml:1:1: cannot read file: No such file or directory\n", "\(named.stderr)")
    }

    /// Defaults documented in the README: RSA-2048, `kid` = the RFC 7638 thumbprint of the public key (what `mint`
    /// derives too, and what the issuer publishes), private key mode 0600.
    @Test func keygenDefaultsAndMintFindTheSameKid() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyPath = dir.appendingPathComponent("key.pem").path
        let jwksPath = dir.appendingPathComponent("jwks.json").path
        let made = try Run.command(Run.gatewayBinary, ["keygen", "--key", keyPath, "--jwks", jwksPath])
        #expect(made.status == 0, "\(made.stderr)")
        let key = try SigningKeys.load(keyPath: keyPath)
        #expect(try key.publicKey.bits == 2048)
        let kid = SigningKeys.defaultKid(for: key)
        #expect(kid == (try key.publicKey.jwkThumbprint) && kid.count == 43)
        #expect(made.stdout.hasPrefix("kid \(kid):"), "\(made.stdout)")
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        let set = try JWKSet.parse(Array(try Data(contentsOf: URL(fileURLWithPath: jwksPath))))
        #expect(set.kids == [kid])

        let minted = try Run.command(Run.gatewayBinary, ["mint", "--key", keyPath, "--project-number", "123456789012",
                                                          "--app-id", "1:123456789012:web:abc"])
        #expect(minted.status == 0, "\(minted.stderr)")
        let token = minted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let header = try #require(token.split(separator: ".").first)
        var text = String(header)
        while text.count % 4 != 0 { text += "=" }
        let decoded = String(decoding: try #require(Data(base64Encoded: text)), as: UTF8.self)
        #expect(decoded.contains("\"kid\":\"\(kid)\""), "\(decoded)")
        let claims = try Self.claims(token)
        #expect((claims["exp"] as? Int).flatMap { exp in (claims["iat"] as? Int).map { exp - $0 } } == 3600)
    }

    /// An issuer signing key (issue 26): `keygen --key FILE` alone writes the key (mode 0600, no JWKS) and prints the
    /// kid the issuer publishes for it — the RFC 7638 thumbprint `IssuerKeys` gives the key in `signing_keys`; and
    /// `Config/issuer.example.yaml` with that key and its documented variables passes `check-config`.
    @Test func keygenMakesAnIssuerSigningKeyAndTheIssuerExampleLoads() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyPath = dir.appendingPathComponent("signing.pem").path
        let made = try Run.command(Run.gatewayBinary, ["keygen", "--key", keyPath])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["signing.pem"])
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: keyPath)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        let published = try IssuerKeys.load(paths: [keyPath]).signer.kid
        #expect(made.stdout == "kid \(published): private key \(keyPath) (RSA-2048; the issuer publishes it under this kid)\n",
                "\(made.stdout)")
        let lonelyKid = try Run.command(Run.gatewayBinary, ["keygen", "--key", keyPath, "--kid", "k1"])
        #expect(lonelyKid.status != 0 && lonelyKid.stderr.contains("--kid names the key in the JWKS: give --jwks too"), "\(lonelyKid.stderr)")

        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "APPCHECK_GATEWAY_CONFIG")
        env["FIREBASE_PROJECT_NUMBER"] = "123456789012"
        env["IOS_APP_ID"] = "1:123456789012:ios:0a1b2c3d4e5f6a7b"
        env["APPLE_TEAM_ID"] = "ABCDE12345"
        env["IOS_BUNDLE_ID"] = "com.example.app"
        env["ISSUER_URL"] = "https://api.example.com/appcheck"
        env["CI_APPCHECK_DEBUG_SECRET"] = "0b5e9d0c-7a53-4c1e-9f0e-3f4a2b1c6d7e"
        env["ISSUER_SIGNING_KEY"] = keyPath
        env["ISSUER_SQLITE"] = dir.appendingPathComponent("issuer.sqlite").path
        env["REPLAY_SQLITE"] = dir.appendingPathComponent("replay.sqlite").path
        let example = Self.repoRoot.appendingPathComponent("Config/issuer.example.yaml").path
        let checked = try Run.command(Run.gatewayBinary, ["check-config", "--config", example], environment: env)
        #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
        #expect(checked.stdout.contains("1:123456789012:ios:0a1b2c3d4e5f6a7b"), "\(checked.stdout)")
        // Without its variables it does not load, and says which.
        env.removeValue(forKey: "ISSUER_URL")
        let unset = try Run.command(Run.gatewayBinary, ["check-config", "--config", example], environment: env)
        #expect(unset.status == 1 && unset.stderr.contains("ISSUER_URL"), "\(unset.stderr)")
    }

    /// `make test` ends with one summary line, printed by the recipe's last command, so only when every command
    /// before it (swift test, conformance, examples, fuzz smoke; each stops make on failure) succeeded. Read
    /// from `make -n` (which prints the recipes, sub-makes included, without running them).
    @Test func makeTestEndsWithOneSummaryLine() throws {
        let dry = try Run.command("make", ["-n", "-C", Self.repoRoot.path, "--no-print-directory", "test"])
        #expect(dry.status == 0, "\(dry.stderr)")
        let lines = dry.stdout.split(separator: "\n").map(String.init)
        #expect(lines.last == #"echo "make test: PASS (swift test, conformance, examples, fuzz smoke)""#, "\(lines.suffix(3))")
        let order = ["swift test --skip-build", "Tests/conformance/run.sh", "Tests/examples/custom-token.sh", "Fuzz/smoke.sh"]
            .map { step in lines.firstIndex { $0.contains(step) } }
        #expect(order.allSatisfy { $0 != nil } && order.compactMap { $0 } == order.compactMap { $0 }.sorted(), "\(lines)")
    }

    /// `--ttl 0s` is a duration, only too short: the message says so. A short lifetime is kept as asked.
    @Test func mintTTLIsExactAndZeroIsExplained() throws {
        let dir = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyPath = dir.appendingPathComponent("key.pem").path
        _ = try Run.command(Run.gatewayBinary, ["keygen", "--key", keyPath, "--jwks", dir.appendingPathComponent("j.json").path])
        let base = ["mint", "--key", keyPath, "--project-number", "1", "--app-id", "a"]

        let zero = try Run.command(Run.gatewayBinary, base + ["--ttl", "0s"])
        #expect(zero.status == 1)
        #expect(zero.stderr.contains("--ttl 0s is too short: a token must live at least 1s"), "\(zero.stderr)")
        let junk = try Run.command(Run.gatewayBinary, base + ["--ttl", "soon"])
        #expect(junk.status == 1)
        #expect(junk.stderr.contains("--ttl soon is not a duration"), "\(junk.stderr)")

        let short = try Run.command(Run.gatewayBinary, base + ["--ttl", "10s"])
        #expect(short.status == 0, "\(short.stderr)")
        let claims = try Self.claims(short.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect((claims["exp"] as? Int).flatMap { exp in (claims["iat"] as? Int).map { exp - $0 } } == 10)
    }

    /// `demo` reads nothing relative to the working directory: started from an empty directory with no
    /// `--config`, it runs the built-in configuration (identical to `Config/demo.yaml`), is ready, verifies its own
    /// tokens, and prints a `mint` command that works when pasted in another directory.
    @Test func demoRunsFromAnyDirectory() throws {
        let elsewhere = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let port = try TestPKI.freePort()
        var adminPort = try TestPKI.freePort()
        while adminPort == port { adminPort = try TestPKI.freePort() }

        let process = Process()
        // Invoked by a relative path, as `.build/debug/appcheck-gateway demo` is: the printed mint command must
        // still work when pasted anywhere else.
        let binary = URL(fileURLWithPath: Run.gatewayBinary).standardizedFileURL.path
        let depth = elsewhere.standardizedFileURL.pathComponents.count - 1
        let relative = String(repeating: "../", count: depth) + binary.dropFirst()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "exec \(relative) demo"]
        process.currentDirectoryURL = elsewhere
        var env = ProcessInfo.processInfo.environment
        env["DEMO_PORT"] = String(port)
        env["DEMO_ADMIN_PORT"] = String(adminPort)
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let output = LockedText()
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            // End of file: cancel the handler's dispatch source before the descriptor can be reused.
            if data.isEmpty { handle.readabilityHandler = nil } else { output.append(data) }
        }
        try process.runHoldingEnvironment()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            pipe.fileHandleForReading.readabilityHandler = nil
        }

        let deadline = Date().addingTimeInterval(60)
        while !output.text.contains(" mint --key ") && process.isRunning && Date() < deadline { usleep(10_000) }
        let banner = output.text.split(separator: "\n").map(String.init)
        #expect(banner.contains { $0.contains("Ready: yes") }, "\(banner)")

        // The configuration it runs is the repository's Config/demo.yaml, byte for byte.
        let configLine = try #require(banner.first { $0.hasPrefix("  config    ") }, "\(banner)")
        let configPath = String(try #require(configLine.dropFirst("  config    ".count).split(separator: " ").first))
        #expect(configLine.contains("built in"), "\(configLine)")
        #expect(!configPath.hasPrefix(elsewhere.path), "\(configPath)")
        let running = try String(contentsOfFile: configPath, encoding: .utf8)
        let shipped = try String(contentsOf: Self.repoRoot.appendingPathComponent("Config/demo.yaml"), encoding: .utf8)
        #expect(running == shipped, "Config/demo.yaml and DemoConfiguration.yaml differ")

        // Its first curl command's token passes the enforced route.
        let curl = try #require(banner.first { $0.hasPrefix("curl -i -H 'X-Firebase-AppCheck: ") }, "\(banner)")
        let token = String(try #require(curl.split(separator: "'").dropFirst().first).dropFirst("X-Firebase-AppCheck: ".count))
        let answer = try RawHTTPClient.roundTrip(
            port: port, "GET /api/orders HTTP/1.1\r\nHost: demo\r\nX-Firebase-AppCheck: \(token)\r\n\r\n")
        #expect(answer.status == 200, "\(answer.bodyText)")

        // The simulated iPhone's steps: its App Attest session token opens the API; its limited-use token (from an
        // assertion) works once, then is refused as reused; the debug exchange mints.
        func tokenIn(_ line: String) -> String? {
            line.split(separator: "'").dropFirst().first.map { String($0.dropFirst("X-Firebase-AppCheck: ".count)) }
        }
        let six = try #require(banner.firstIndex { $0.hasPrefix("6. The gateway is an App Check provider too") }, "\(banner)")
        let sessionLine = try #require(banner[six...].first { $0.hasPrefix("curl -i -H 'X-Firebase-AppCheck: ") })
        let session = try #require(tokenIn(sessionLine))
        let attested = try RawHTTPClient.roundTrip(port: port, "GET /api/orders HTTP/1.1\r\nHost: demo\r\nX-Firebase-AppCheck: \(session)\r\n\r\n")
        #expect(attested.status == 200, "\(attested.status) \(attested.bodyText)")
        let limitedLine = try #require(banner[six...].first { $0.hasPrefix("curl -i -X POST -H 'X-Firebase-AppCheck: ") })
        let limited = try #require(tokenIn(limitedLine))
        let redeem = "POST /api/redeem HTTP/1.1\r\nHost: demo\r\nContent-Length: 0\r\nX-Firebase-AppCheck: \(limited)\r\n\r\n"
        let first = try RawHTTPClient.roundTrip(port: port, redeem, method: "POST")
        #expect(first.status == 200, "\(first.bodyText)")
        #expect(try RawHTTPClient.roundTrip(port: port, redeem, method: "POST").status == 401)
        let debugLine = try #require(banner.first { $0.contains(":exchangeDebugToken") })
        let debug = try BoundedCommand.run("/bin/sh", ["-c", debugLine], timeout: 15)
        #expect(debug.stdout.contains(#""token":"ey"#), "\(debug.stdout) \(debug.stderr)")

        // Fraud risk (step 9): the demo stand-in for Apple's data server refreshed the iPhone's receipt right after it
        // attested, so the limited-use token carries risk 1, and the metrics and the dashboard show one key at 1.
        let nine = try #require(banner.firstIndex { $0.hasPrefix("9. Fraud risk:") }, "\(banner)")
        #expect(banner[nine...].prefix(3).joined().contains("DEMO"), "the stand-in is labelled: \(banner[nine...].prefix(3))")
        #expect(banner[nine].contains("(1 refreshed)"), "\(banner[nine])")
        #expect(try Self.claims(limited)["risk"] as? Int == 1)
        let riskCurls = banner[nine...].filter { $0.hasPrefix("curl -s http://127.0.0.1:\(adminPort)/") }
        #expect(riskCurls.count == 2, "\(banner[nine...])")
        let scraped = try BoundedCommand.run("/bin/sh", ["-c", try #require(riskCurls.first)], timeout: 15).stdout
        #expect(scraped.contains(#"appcheck_issuer_risk_metric_bucket{app_id="1:123456789012:ios:0123456789abcdef",le="1"} 1"#),
                "\(scraped)")
        let buckets = try BoundedCommand.run("/bin/sh", ["-c", try #require(riskCurls.last)], timeout: 15).stdout
        #expect(buckets.contains(#""1":1,"#) && buckets.contains(#""unknown":0"#), "\(buckets)")

        // The printed mint command names the binary by an absolute path (or a bare name on PATH).
        let mintLine = try #require(banner.first { $0.contains(" mint --key ") })
        #expect(mintLine.hasPrefix("/"), "\(mintLine)")
        let minted = try BoundedCommand.run("/bin/sh", ["-c", "cd / && " + mintLine], timeout: 15)
        #expect(minted.status == 0, "\(minted.stderr)")
        #expect(minted.stdout.split(separator: ".").count == 3, "\(minted.stdout)")

        kill(process.processIdentifier, SIGINT)
        let stopBy = Date().addingTimeInterval(15)
        while process.isRunning && Date() < stopBy { usleep(10_000) }
        #expect(!process.isRunning)
        #expect(!FileManager.default.fileExists(atPath: configPath), "the demo's directory is removed at exit")
    }
}

/// Output collected from a child's pipe on a background handler.
final class LockedText: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func append(_ more: Data) { lock.lock(); data.append(more); lock.unlock() }
    var text: String { lock.lock(); defer { lock.unlock() }; return String(decoding: data, as: UTF8.self) }
}
