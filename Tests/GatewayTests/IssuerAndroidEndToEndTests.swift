import AppAttestSimulator
import AppCheck
import Foundation
@testable import Issuer
import TestSupport
import Testing

/// Android Key Attestation end to end (SPEC §10, issue 37): a simulated Android device attests and asserts through a
/// real gateway with the Kotlin provider's wire messages (docs/examples/android), and each rule is refused on its
/// own, with real certificates made by OpenSSL, a status list served from a file, and real state stores.
@Suite(.serialized) struct IssuerAndroidEndToEndTests {
    static let package = "com.example.app"
    static let digest = [UInt8](repeating: 0xD1, count: 32)
    static let digestHex = String(repeating: "d1", count: 32)
    /// The apps: a plain one, one whose status list revokes the intermediate, one that suspends it, one that
    /// requires StrongBox and patch level 2026-12, and one whose status list cannot be fetched.
    static let plain = "1:123456789012:android:0a01", revoked = "1:123456789012:android:0a02",
               suspended = "1:123456789012:android:0a03", strict = "1:123456789012:android:0a04",
               stale = "1:123456789012:android:0a05", both = "1:123456789012:android:0a06"

    final class Rig: @unchecked Sendable {
        let ca: SimulatedAndroidCA
        let device: SimulatedAndroidDevice
        let dir: URL
        let keyPath: String

        init() throws {
            ca = try SimulatedAndroidCA(now: Int64(Date().timeIntervalSince1970))
            device = SimulatedAndroidDevice(ca: ca, packageName: IssuerAndroidEndToEndTests.package,
                                            signingCertificateDigest: IssuerAndroidEndToEndTests.digest)
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-android-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            keyPath = dir.appendingPathComponent("sign.pem").path
            try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: keyPath, atomically: true, encoding: .utf8)
            try ca.rootPEM.write(toFile: path("root.pem"), atomically: true, encoding: .utf8)
            try status([:]).write(toFile: path("clean.json"), atomically: true, encoding: .utf8)
            try status([ca.intermediateSerialHex: "REVOKED"]).write(toFile: path("revoked.json"), atomically: true, encoding: .utf8)
            try status(["0" + ca.intermediateSerialHex.uppercased(): "SUSPENDED"]).write(toFile: path("suspended.json"), atomically: true, encoding: .utf8)
        }

        func path(_ name: String) -> String { dir.appendingPathComponent(name).path }

        /// A status list shaped like Google's.
        func status(_ entries: [String: String]) -> String {
            "{\"entries\":{" + entries.map { "\"\($0.key)\":{\"status\":\"\($0.value)\",\"reason\":\"KEY_COMPROMISE\"}" }
                .joined(separator: ",") + "}}"
        }

        func app(_ id: String, status: String, extra: [String] = []) -> String {
            ([
                "    - app_id: \"\(id)\"",
                "      android:",
                "        package_name: \(IssuerAndroidEndToEndTests.package)",
                "        signing_cert_sha256: [\"\(IssuerAndroidEndToEndTests.digestHex)\"]",
                "        root_ca_file: \(path("root.pem"))",
                "        revocation_url: \(status)",
            ] + extra.map { "        " + $0 }).joined(separator: "\n")
        }

        /// The `issuer:` section on `state`.
        func issuer(state: String) -> String {
            ([
                "issuer:",
                "  issuer_url: https://api.example.com/appcheck",
                "  signing_keys: [\(keyPath)]",
                "  state: \(state)",
                "  max_exchanges_per_second: 100000",
                "  max_exchanges_per_address: 0",
                "  apps:",
                app(IssuerAndroidEndToEndTests.plain, status: "file://" + path("clean.json")),
                app(IssuerAndroidEndToEndTests.revoked, status: "file://" + path("revoked.json")),
                app(IssuerAndroidEndToEndTests.suspended, status: "file://" + path("suspended.json")),
                app(IssuerAndroidEndToEndTests.strict, status: "file://" + path("clean.json"),
                    extra: ["require_strongbox: true", "min_patch_level: 2026-12"]),
                app(IssuerAndroidEndToEndTests.stale, status: "http://127.0.0.1:9/attestation/status"),
                app(IssuerAndroidEndToEndTests.both, status: "file://" + path("clean.json")),
                "      team_id: ABCDE12345", "      bundle_id: com.example.app",
                "      app_attest: { root_ca_file: \(path("root.pem")) }",
            ]).joined(separator: "\n") + "\n"
        }

        func gateway(state: String = "{ store: memory }") throws -> GatewayHarness {
            try GatewayHarness { upstream in
                GatewayHarness.config(upstream: upstream, routes: """
                  - name: android-only
                    prefix: /
                    upstream: api
                    enforcement: enforce
                    providers: [android_key]
                """, appCheck: """
                  jwks: { url: "http://127.0.0.1:9/jwks" }
                """, top: self.issuer(state: state))
            }
        }

        func cleanUp() { try? FileManager.default.removeItem(at: dir) }
    }

    /// One exchange over a real socket.
    struct Client {
        let port: UInt16

        func post(_ app: String, _ method: String, _ body: String) throws -> TestResponse {
            try RawHTTPClient.roundTrip(port: port,
                                        "POST /appcheck/v1/projects/123456789012/apps/\(app):\(method) HTTP/1.1\r\nHost: gw\r\n"
                                        + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)",
                                        method: "POST", timeout: 30)
        }

        /// `generateAndroidKeyChallenge`, as the Kotlin provider calls it (an empty JSON object).
        func challenge(_ app: String) throws -> [UInt8] {
            let r = try post(app, "generateAndroidKeyChallenge", "{}")
            #expect(r.status == 200, "\(r.bodyText)")
            let text = try #require(try StrictJSON.parse(r.body).member("challenge")?.stringValue)
            return try #require(IssuerJSON.decodeBase64(text))
        }

        func attestation(_ app: String, chain: [[UInt8]], challenge: [UInt8], limitedUse: Bool = false) throws -> TestResponse {
            let certificates = chain.map { "\"\(IssuerJSON.encodeBase64($0))\"" }.joined(separator: ",")
            return try post(app, "exchangeAndroidKeyAttestation",
                            #"{"certificateChain":[\#(certificates)],"challenge":"\#(IssuerJSON.encodeBase64(challenge))","limitedUse":\#(limitedUse)}"#)
        }

        /// A fresh challenge, a key attested with it (`description` applied), and the exchange.
        func attest(_ app: String, _ device: SimulatedAndroidDevice,
                    _ change: (inout SimulatedKeyDescription) -> Void = { _ in }) throws -> (TestResponse, SimulatedAndroidDevice.Key) {
            let c = try challenge(app)
            var description = SimulatedKeyDescription()
            change(&description)
            let key = try device.generateKey(challenge: c, now: Int64(Date().timeIntervalSince1970), description: description)
            return (try attestation(app, chain: key.chain, challenge: c), key)
        }

        func assertion(_ app: String, artifact: [UInt8], challenge: [UInt8], signature: [UInt8]) throws -> TestResponse {
            try post(app, "exchangeAndroidKeyAssertion",
                     #"{"artifact":"\#(IssuerJSON.encodeBase64(artifact))","challenge":"\#(IssuerJSON.encodeBase64(challenge))","signature":"\#(IssuerJSON.encodeBase64(signature))"}"#)
        }

        /// A fresh challenge signed by `key`, exchanged.
        func assert(_ app: String, artifact: [UInt8], key: SimulatedAndroidDevice.Key) throws -> TestResponse {
            let c = try challenge(app)
            return try assertion(app, artifact: artifact, challenge: c, signature: try key.sign(c))
        }
    }

    static func artifact(_ r: TestResponse) throws -> [UInt8] {
        let text = try #require(try StrictJSON.parse(r.body).member("artifact")?.stringValue)
        return try #require(IssuerJSON.decodeBase64(text))
    }

    /// The `provider` claim of the token in `r` (at `appCheckToken.token` or `token`).
    static func provider(_ r: TestResponse) throws -> String? {
        let body = try StrictJSON.parse(r.body)
        let token = try #require(body.member("appCheckToken")?.member("token")?.stringValue ?? body.member("token")?.stringValue)
        let parts = token.split(separator: ".")
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])) else { return nil }
        return try StrictJSON.parse(payload).member("provider")?.stringValue
    }

    /// `(status, rule)` of a refused exchange, the rule read from the gateway's log line for it.
    static func refusal(_ r: TestResponse, _ gateway: GatewayHarness, _ rule: String) -> Bool {
        (r.status == 403 || r.status == 400 || r.status == 503) && gateway.logged(#""rule":"\#(rule)""#)
    }

    @Test func attestThenAssertMintsAndroidKeyTokensThatRoutesAdmit() throws {
        let rig = try Rig()
        defer { rig.cleanUp() }
        let gateway = try rig.gateway()
        defer { gateway.stop() }
        let client = Client(port: gateway.port)

        let (attested, key) = try client.attest(Self.plain, rig.device)
        #expect(attested.status == 200, "\(attested.bodyText)")
        #expect(try Self.provider(attested) == "android_key")
        let artifact = try Self.artifact(attested)
        #expect(artifact.count == 32)

        let asserted = try client.assert(Self.plain, artifact: artifact, key: key)
        #expect(asserted.status == 200, "\(asserted.bodyText)")
        #expect(try Self.provider(asserted) == "android_key")
        #expect(try StrictJSON.parse(asserted.body).member("ttl")?.stringValue == "3600s")

        // The minted token passes a route that lists only android_key.
        let token = try #require(try StrictJSON.parse(asserted.body).member("token")?.stringValue)
        let proxied = try RawHTTPClient.roundTrip(port: gateway.port, "GET /hello HTTP/1.1\r\nHost: gw\r\nX-Firebase-AppCheck: \(token)\r\n\r\n")
        #expect(proxied.status == 200, "\(proxied.bodyText)")

        let metrics = try RawHTTPClient.roundTrip(port: gateway.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains(#"appcheck_issuer_exchanges_total{app_id="\#(Self.plain)",method="exchangeAndroidKeyAttestation",result="minted"} 1"#))
        #expect(metrics.contains(#"appcheck_issuer_exchanges_total{app_id="\#(Self.plain)",method="exchangeAndroidKeyAssertion",result="minted"} 1"#))
        #expect(metrics.contains(#"appcheck_issuer_exchanges_total{app_id="\#(Self.plain)",method="generateAndroidKeyChallenge",result="challenge"} 2"#))
        let dashboard = try RawHTTPClient.roundTrip(port: gateway.adminPort, "GET /dashboard.json HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(dashboard.contains("exchangeAndroidKeyAssertion"), "the dashboard's issuer block lists the Android methods")
    }

    @Test func eachAndroidRuleIsRefusedOnItsOwn() throws {
        let rig = try Rig()
        defer { rig.cleanUp() }
        let gateway = try rig.gateway()
        defer { gateway.stop() }
        let client = Client(port: gateway.port)
        let now = Int64(Date().timeIntervalSince1970)

        // Untrusted root: a device of another PKI.
        let stranger = SimulatedAndroidDevice(ca: try SimulatedAndroidCA(now: now), packageName: Self.package, signingCertificateDigest: Self.digest)
        #expect(Self.refusal(try client.attest(Self.plain, stranger).0, gateway, "android_chain_untrusted"))
        // Revoked and suspended intermediate (the apps' status lists say so).
        #expect(Self.refusal(try client.attest(Self.revoked, rig.device).0, gateway, "android_certificate_revoked"))
        #expect(Self.refusal(try client.attest(Self.suspended, rig.device).0, gateway, "android_certificate_suspended"))
        // A status list that cannot be fetched: 503, fail closed.
        let stale = try client.attest(Self.stale, rig.device).0
        #expect(stale.status == 503 && stale.bodyText.contains("UNAVAILABLE"), "\(stale.bodyText)")
        #expect(gateway.logged(#""rule":"android_status_list_stale""#))
        // Wrong challenge in the KeyDescription; a challenge presented twice.
        #expect(Self.refusal(try client.attest(Self.plain, rig.device) { $0.challenge = [UInt8](repeating: 7, count: 32) }.0,
                             gateway, "android_challenge"))
        let c = try client.challenge(Self.plain)
        let key = try rig.device.generateKey(challenge: c, now: now)
        #expect(try client.attestation(Self.plain, chain: key.chain, challenge: c).status == 200)
        let again = try client.attestation(Self.plain, chain: key.chain, challenge: c)
        #expect(again.status == 403 && gateway.logged(#""rule":"challenge_unknown""#))
        // Security levels, boot state, application id, patch level.
        #expect(Self.refusal(try client.attest(Self.plain, rig.device) { $0.attestationSecurityLevel = 0 }.0, gateway, "android_security_level"))
        #expect(Self.refusal(try client.attest(Self.strict, rig.device) { $0.osPatchLevel = 202_612 }.0, gateway, "android_strongbox_required"))
        #expect(Self.refusal(try client.attest(Self.plain, rig.device) { $0.deviceLocked = false }.0, gateway, "android_device_unlocked"))
        #expect(Self.refusal(try client.attest(Self.plain, rig.device) { $0.verifiedBootState = 2 }.0, gateway, "android_boot_not_verified"))
        #expect(Self.refusal(try client.attest(Self.plain, rig.device) { $0.packageName = "com.example.evil" }.0, gateway, "android_package_name"))
        #expect(Self.refusal(try client.attest(Self.plain, rig.device) { $0.signatureDigests = [[UInt8](repeating: 2, count: 32)] }.0,
                             gateway, "android_signing_certificate"))
        #expect(Self.refusal(try client.attest(Self.strict, rig.device) { $0.attestationSecurityLevel = 2; $0.keyMintSecurityLevel = 2 }.0,
                             gateway, "android_patch_level"))
        let strongBox = try client.attest(Self.strict, rig.device) {
            $0.attestationSecurityLevel = 2; $0.keyMintSecurityLevel = 2; $0.osPatchLevel = 202_612
        }.0
        #expect(strongBox.status == 200, "StrongBox at 2026-12 passes the strict app: \(strongBox.bodyText)")
        // A malformed extension, and an oversized chain (400).
        #expect(Self.refusal(try client.attest(Self.plain, rig.device) { $0.rawValue = [0x30, 0x80, 0x00, 0x00] }.0,
                             gateway, "android_key_description_malformed"))
        let big = try client.challenge(Self.plain)
        let long = try client.attestation(Self.plain, chain: Array(repeating: rig.ca.intermediateDER, count: 9), challenge: big)
        #expect(long.status == 400 && gateway.logged(#""rule":"android_chain_malformed""#), "\(long.bodyText)")

        // Bad fields are 400 and name their rule.
        for (body, rule) in [(#"{"challenge":"AQID"}"#, "missing_certificate_chain"),
                             (#"{"certificateChain":"MIIB","challenge":"AQID"}"#, "invalid_certificate_chain"),
                             (#"{"certificateChain":[],"challenge":"AQID"}"#, "invalid_certificate_chain"),
                             (#"{"certificateChain":["!!"],"challenge":"AQID"}"#, "invalid_base64_certificate_chain"),
                             (#"{"certificateChain":[7],"challenge":"AQID"}"#, "invalid_base64_certificate_chain")] {
            let r = try client.post(Self.plain, "exchangeAndroidKeyAttestation", body)
            #expect(r.status == 400 && gateway.logged(#""rule":"\#(rule)""#), "\(body): \(r.bodyText)")
        }

        // Assertions: a wrong key, an unknown artifact, a challenge used twice.
        let (ok, attestedKey) = try client.attest(Self.plain, rig.device)
        let artifact = try Self.artifact(ok)
        let other = try rig.device.generateKey(challenge: [1], now: now)
        #expect(Self.refusal(try client.assert(Self.plain, artifact: artifact, key: other), gateway, "android_signature"))
        #expect(Self.refusal(try client.assert(Self.plain, artifact: [UInt8](repeating: 9, count: 32), key: attestedKey),
                             gateway, "unknown_artifact"))
        let once = try client.challenge(Self.plain)
        let signature = try attestedKey.sign(once)
        #expect(try client.assertion(Self.plain, artifact: artifact, challenge: once, signature: signature).status == 200)
        let replay = try client.assertion(Self.plain, artifact: artifact, challenge: once, signature: signature)
        #expect(replay.status == 403 && replay.bodyText.contains("PERMISSION_DENIED"))
        // The response never names the rule; the log line does.
        #expect(!replay.bodyText.contains("challenge_unknown"))
        // An Android-only app has no App Attest methods; where an app has both, an Android artifact is no App Attest key.
        let appAttest = try client.post(Self.plain, "exchangeAppAttestAssertion", "{}")
        #expect(appAttest.status == 404)
        let (bothAttested, _) = try client.attest(Self.both, rig.device)
        let bothArtifact = try Self.artifact(bothAttested)
        let crossChallenge = try client.challenge(Self.both)
        let cross = try client.post(Self.both, "exchangeAppAttestAssertion",
                                    #"{"artifact":"\#(IssuerJSON.encodeBase64(bothArtifact))","assertion":"AAAA","challenge":"\#(IssuerJSON.encodeBase64(crossChallenge))"}"#)
        #expect(cross.status == 403, "\(cross.bodyText)")

        // No log line carries evidence: a certificate, a signature, an artifact or a challenge.
        let secrets = [IssuerJSON.encodeBase64(key.chain[0]).prefix(40), IssuerJSON.encodeBase64(signature).prefix(40),
                       IssuerJSON.encodeBase64(artifact).prefix(40), IssuerJSON.encodeBase64(once).prefix(40)]
        let lines = gateway.logLines()
        #expect(lines.count > 20)
        for secret in secrets { #expect(!lines.contains { $0.contains(secret) }, "\(secret) logged") }
    }

    @Test func attestedKeysSurviveKill9OnSQLite() throws {
        let rig = try Rig()
        defer { rig.cleanUp() }
        let statePath = rig.path("issuer.sqlite")
        let yaml = GatewayHarness.config(upstream: "http://127.0.0.1:9", routes: """
          - name: open
            prefix: /
            upstream: api
            enforcement: off
        """, appCheck: "  jwks: { url: \"http://127.0.0.1:9/jwks\" }", top: rig.issuer(state: "{ store: sqlite, sqlite_path: \(statePath) }"))
        let configPath = rig.path("gateway.yaml")
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)

        let first = try GatewayProcess.serve(config: configPath)
        defer { if first.process.isRunning { kill(first.process.processIdentifier, SIGKILL) } }
        let (attested, key) = try Client(port: first.port).attest(Self.plain, rig.device)
        #expect(attested.status == 200, "\(attested.bodyText)")
        let artifact = try Self.artifact(attested)
        kill(first.process.processIdentifier, SIGKILL)
        first.process.waitUntilExit()

        let second = try GatewayProcess.serve(config: configPath)
        defer { if second.process.isRunning { kill(second.process.processIdentifier, SIGKILL) } }
        let asserted = try Client(port: second.port).assert(Self.plain, artifact: artifact, key: key)
        #expect(asserted.status == 200, "the key attested before kill -9 is still known: \(asserted.bodyText)")
    }

    @Test func twoGatewaysShareKeysAndChallengesOnOneRedis() throws {
        let redis = try RedisServerProcess()
        let rig = try Rig()
        defer { rig.cleanUp() }
        let state = "{ store: redis, redis_url: \"\(redis.url)\" }"
        let a = try rig.gateway(state: state), b = try rig.gateway(state: state)
        defer { a.stop(); b.stop() }
        let (attested, key) = try Client(port: a.port).attest(Self.plain, rig.device)
        #expect(attested.status == 200, "\(attested.bodyText)")
        let artifact = try Self.artifact(attested)
        // Attested through one gateway, asserted through the other.
        #expect(try Client(port: b.port).assert(Self.plain, artifact: artifact, key: key).status == 200)
        // A challenge issued by one and spent on the other is spent for both.
        let c = try Client(port: b.port).challenge(Self.plain)
        let signature = try key.sign(c)
        #expect(try Client(port: a.port).assertion(Self.plain, artifact: artifact, challenge: c, signature: signature).status == 200)
        #expect(try Client(port: b.port).assertion(Self.plain, artifact: artifact, challenge: c, signature: signature).status == 403)
    }
}
