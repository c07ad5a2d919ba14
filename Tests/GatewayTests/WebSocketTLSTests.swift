import Foundation
import Glibc
import Testing
import TestSupport

/// WebSocket over TLS (SPEC §6.1, docs/behaviour.md "The tunnel"): a `wss://` handshake to the gateway's TLS listener
/// on an `enforce` route, by Python's `websockets` trusting only a test CA made for this test (hostname checked):
/// refused without a token, echoing both ways with one, and the close handshake carried through the tunnel in each
/// direction (client first, and upstream first).
@Suite(.serialized) struct WebSocketTLSTests {
    static let clientScript = #"""
    import asyncio, json, os, ssl, sys, websockets
    url, cafile, mode, token = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

    async def main():
        out = {}
        context = ssl.create_default_context(cafile=cafile)   # verifies the chain and the name (127.0.0.1)
        headers = {"X-Firebase-AppCheck": token} if token else {}
        try:
            async with websockets.connect(url, ssl=context, extra_headers=headers, ping_interval=None, open_timeout=10,
                                          close_timeout=10, max_size=None) as ws:
                out["status"] = 101
                out["request_id"] = ws.response_headers.get("X-Request-Id")
                out["tls"] = ws.transport.get_extra_info("ssl_object").version()
                if mode == "echo":
                    await ws.send("hello over tls")
                    out["text"] = await ws.recv()
                    payload = os.urandom(300000)
                    await ws.send(payload)
                    out["binary_equal"] = (await ws.recv()) == payload
                elif mode == "serverclose":
                    out["text"] = await ws.recv()
                    try:
                        await asyncio.wait_for(ws.recv(), 20)
                    except websockets.exceptions.ConnectionClosed as e:
                        out["closed_by_upstream"] = e.rcvd.code if e.rcvd else None
            # Leaving the block sent our close frame and waited for the answer, which only the upstream gives:
            # 1000 when it came back through the tunnel, 1006 when the connection just dropped.
            out["close_code"] = ws.close_code
        except websockets.exceptions.InvalidStatusCode as e:
            out["status"] = e.status_code
        print(json.dumps(out))

    asyncio.run(main())
    """#

    static func client(_ dir: String, port: UInt16, path: String, ca: String, mode: String, token: String?) throws -> [String: Any] {
        let script = dir + "/wss_client.py"
        try clientScript.write(toFile: script, atomically: true, encoding: .utf8)
        let r = try BoundedCommand.run(WebSocketTests.python, [script, "wss://127.0.0.1:\(port)\(path)", ca, mode, token ?? ""],
                                       timeout: 60)
        guard let line = r.stdout.split(separator: "\n").last,
              let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw HarnessError("wss client: \(r.status) \(r.stdout) \(r.stderr)")
        }
        return obj
    }

    @Test func wssHandshakeIsCheckedEchoesBothWaysAndCarriesTheCloseEachWay() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let ws = try WebSocketTests.PythonUpstream("ws")
        defer { ws.stop() }
        let pki = try TestPKI()
        defer { try? FileManager.default.removeItem(atPath: pki.directory) }
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: chat, prefix: /ws/, upstream: ws, enforcement: enforce, websocket: true }
            """, server: """

              tls:
                listen: ["127.0.0.1:0"]
                certificate: \(pki.cert)
                private_key: \(pki.key)
            """, appCheck: """
              project_id: "\(AppCheckEndToEndTests.projectId)"
              jwks:
                url: \(issuer.jwksURL)
            """, upstreamExtra: """
              ws:
                url: \(ws.url)
                response_timeout: 5s
            """)
        }
        defer { h.stop() }
        try h.waitUntilReady()
        let tlsPort = try #require(h.server.tlsListenAddresses.first?.port)
        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)

        // App Check is enforced on the TLS listener too: no token, no tunnel, and the upstream never sees it.
        let refused = try Self.client(pki.directory, port: tlsPort, path: "/ws/echo", ca: pki.caCert, mode: "echo", token: nil)
        #expect(refused["status"] as? Int == 401, "\(refused)")
        #expect(ws.requests.isEmpty, "\(ws.requests.map(\.path))")

        // Echo both ways (text, and 300 kB of random binary), then the client closes: the upstream's answer to the
        // close frame comes back through the tunnel.
        let echo = try Self.client(pki.directory, port: tlsPort, path: "/ws/echo", ca: pki.caCert, mode: "echo", token: token)
        #expect(echo["status"] as? Int == 101, "\(echo)")
        #expect(["TLSv1.2", "TLSv1.3"].contains(echo["tls"] as? String ?? ""), "\(echo)")
        #expect(echo["text"] as? String == "hello over tls", "\(echo)")
        #expect(echo["binary_equal"] as? Bool == true, "\(echo)")
        #expect(echo["close_code"] as? Int == 1000, "the close handshake did not come back through the tunnel: \(echo)")
        let seen = try #require(ws.requests.last)
        #expect(WebSocketTests.header(seen.headers, "x-appcheck-status") == ["verified"])
        #expect(WebSocketTests.header(seen.headers, "x-firebase-appcheck").isEmpty)
        let id = try #require(echo["request_id"] as? String)
        let line = try #require(WebSocketTests.logLine(h, requestId: id))
        #expect(line["status"] as? Int == 101)
        #expect(line["outcome"] as? String == "verified")
        #expect((line["bytes_in"] as? Int ?? 0) > 300_000, "\(line)")
        #expect((line["bytes_out"] as? Int ?? 0) > 300_000, "\(line)")
        #expect(line["tunnel_end"] as? String == "closed", "\(line)")

        // The upstream closes first: its close frame (1000) reaches the client through the tunnel.
        let closed = try Self.client(pki.directory, port: tlsPort, path: "/ws/close", ca: pki.caCert, mode: "serverclose", token: token)
        #expect(closed["status"] as? Int == 101, "\(closed)")
        #expect(closed["text"] as? String == "bye", "\(closed)")
        #expect(closed["closed_by_upstream"] as? Int == 1000, "\(closed)")
        let closedId = try #require(closed["request_id"] as? String)
        #expect(WebSocketTests.logLine(h, requestId: closedId)?["status"] as? Int == 101)
    }
}
