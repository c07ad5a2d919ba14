import AppCheck
import Foundation
import Testing
import TestSupport

/// docs/examples/web/dpop.js for real in headless Chromium (Debian's `chromium`), served through a real gateway with
/// an issuer (SPEC §4.4, §10): the page makes its non-extractable P-256 key (kept in IndexedDB: a second page load in
/// the same profile finds the same key), exchanges with a proof for a bound token, and its `dpopFetch` requests are
/// accepted; the same token replayed from outside the page, without the key, is refused.
@Suite(.serialized) struct WebDPoPBrowserTests {
    static let appId = "1:123456789012:web:0a1b2c3d4e5f6a7b"
    static let secret = "debug-secret-0123456789abcdef"

    /// A static file server for the page (Python's http.server on a free port), stopped by the returned closure.
    static func fileServer(_ directory: String) throws -> (port: Int, stop: () -> Void) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        p.arguments = ["-u", "-c", """
            import functools, http.server, sys
            h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
            s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
            print(s.server_address[1], flush=True)
            s.serve_forever()
            """, directory]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        var line = Data()
        while !line.contains(0x0A) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            kill(p.processIdentifier, SIGKILL)
            throw HarnessError("the file server did not start")
        }
        // SIGKILL: a child of the test process may start with SIGTERM blocked.
        return (port, { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() })
    }

    @Test func keyMadeInThePageBindsTheTokenAndTheTokenAloneIsRefused() throws {
        #expect(FileManager.default.isExecutableFile(atPath: DashboardBrowserTests.chromium), "chromium is missing")
        let site = FileManager.default.temporaryDirectory.appendingPathComponent("web-dpop-\(UUID().uuidString)")
        let www = site.appendingPathComponent("web")
        try FileManager.default.createDirectory(at: www, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: site) }
        let example = DashboardBrowserTests.repoRoot.appendingPathComponent("docs/examples/web/dpop.js")
        try FileManager.default.copyItem(at: example, to: www.appendingPathComponent("dpop.js"))
        let exchangeURL = "/appcheck/v1/projects/123456789012/apps/\(Self.appId):exchangeDebugToken"
        try """
        <!doctype html><html><body><pre id="result">pending</pre>
        <script>
        // A classic script importing the module: headless Chromium's virtual time does not wait for a module's
        // top-level await.
        (async () => {
          const out = {};
          try {
            const { getKeyPair, thumbprint, exchange, dpopFetch } = await import("./dpop.js");
            const pair = await getKeyPair();
            out.extractable = pair.privateKey.extractable;
            out.thumbprint = await thumbprint();
            try { await crypto.subtle.exportKey("jwk", pair.privateKey); out.exported = true; } catch (e) { out.exported = false; }
            const { token } = await exchange(new URL("\(exchangeURL)", location.href).href, { debug_token: "\(Self.secret)" });
            out.token = token;
            const api = dpopFetch(() => token);
            out.first = (await api("/api/items?page=2")).status;
            out.second = (await api("/api/items", { method: "POST", body: "x" })).status;
            out.bare = (await fetch("/api/items", { headers: { "X-Firebase-AppCheck": token } })).status;
          } catch (e) { out.error = String(e); }
          document.getElementById("result").textContent = JSON.stringify(out);
          // Reported to the test through the gateway (a route to the recording upstream): the browser runs in real
          // time until the test has it.
          await fetch("/report/?" + encodeURIComponent(JSON.stringify(out)));
        })();
        </script></body></html>
        """.write(to: www.appendingPathComponent("index.html"), atomically: true, encoding: .utf8)
        let files = try Self.fileServer(site.path)
        defer { files.stop() }

        let keyDir = site.appendingPathComponent("keys")
        try FileManager.default.createDirectory(at: keyDir, withIntermediateDirectories: true)
        let keyPath = keyDir.appendingPathComponent("sign.pem").path
        try RSAPrivateKey.generate(bits: 2048).pemRepresentation().write(toFile: keyPath, atomically: true, encoding: .utf8)
        let h = try GatewayHarness { upstream in
            GatewayHarness.config(upstream: upstream, routes: """
              - name: web
                prefix: /web/
                upstream: www
                enforcement: off
              - name: api
                prefix: /api/
                upstream: api
                enforcement: enforce
                dpop: required
              - name: report
                prefix: /report/
                upstream: api
                enforcement: off
            """, appCheck: "  jwks: { url: none }", upstreamExtra: """
              www:
                url: http://127.0.0.1:\(files.port)
            """, top: """
            issuer:
              base_path: /appcheck
              issuer_url: https://api.example.com/appcheck
              signing_keys: [\(keyPath)]
              apps:
                - app_id: "\(Self.appId)"
                  debug_secrets: ["\(Self.secret)"]
                  require_dpop: true
            """)
        }
        defer { h.stop() }
        try h.waitUntilReady()
        Thread.sleep(forTimeInterval: 1.1)  // proofs made in the replay store's first second count as made before it

        let profile = NSTemporaryDirectory() + "web-dpop-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        /// Loads the page in headless Chromium (real time, no virtual-time budget: WebCrypto and IndexedDB work is
        /// not something virtual time waits for) until it reports its results, at most 60 s.
        func runPage() throws -> [String: Any] {
            let before = h.upstream.receivedHeads.count
            let browser = Process()
            browser.executableURL = URL(fileURLWithPath: DashboardBrowserTests.chromium)
            browser.arguments = DashboardBrowserTests.flags(profile: profile) + [
                "--remote-debugging-port=0", "http://127.0.0.1:\(h.port)/web/index.html"]
            browser.standardOutput = FileHandle.nullDevice
            browser.standardError = FileHandle.nullDevice
            try browser.run()
            // Its helper processes (zygote, renderer) end when they lose the browser process.
            defer { kill(browser.processIdentifier, SIGKILL); browser.waitUntilExit() }
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                let heads = h.upstream.receivedHeads
                if heads.count > before, let line = heads[before...].first(where: { $0.hasPrefix("GET /report/?") }) {
                    let query = line.dropFirst("GET /report/?".count).prefix { $0 != " " }
                    let json = try #require(String(query).removingPercentEncoding)
                    return try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any], "\(json)")
                }
                Thread.sleep(forTimeInterval: 0.1)
            }
            throw HarnessError("the page reported nothing within 60 s")
        }
        let first = try runPage()
        #expect(first["error"] == nil, "\(first)")
        #expect(first["extractable"] as? Bool == false)
        #expect(first["exported"] as? Bool == false, "the private key could be exported")
        #expect(first["first"] as? Int == 200, "\(first)")
        #expect(first["second"] as? Int == 200, "\(first)")
        #expect(first["bare"] as? Int == 401, "the token without a proof, from the page itself")
        let thumbprint = try #require(first["thumbprint"] as? String)
        let token = try #require(first["token"] as? String)
        let payload = try StrictJSON.parse(Base64URL.decode(String(token.split(separator: ".")[1])) ?? [])
        #expect(payload.member("cnf")?.member("jkt")?.stringValue == thumbprint, "minted cnf.jkt is the page key's thumbprint")

        // The same token from outside the page, without its key.
        let stolen = try RawHTTPClient.roundTrip(port: h.port, "GET /api/items HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\nX-Firebase-AppCheck: \(token)\r\n\r\n")
        #expect(stolen.status == 401)
        #expect(AppCheckEndToEndTests.json(stolen)["reason"] == "dpop_missing")
        let thief = try #require(DPoPPrivateKey.generate())
        let forged = try #require(thief.proof(htm: "GET", htu: "http://127.0.0.1:\(h.port)/api/items",
                                              iat: Date().timeIntervalSince1970, jti: "thief", accessToken: token))
        let withOtherKey = try RawHTTPClient.roundTrip(port: h.port, "GET /api/items HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\nX-Firebase-AppCheck: \(token)\r\nDPoP: \(forged)\r\n\r\n")
        #expect(withOtherKey.status == 401)
        #expect(AppCheckEndToEndTests.json(withOtherKey)["reason"] == "dpop_invalid")

        // A second page load in the same browser profile finds the same key in IndexedDB.
        let second = try runPage()
        #expect(second["thumbprint"] as? String == thumbprint, "\(second)")
        #expect(second["first"] as? Int == 200, "\(second)")
    }
}
