import Foundation
@testable import Gateway
import Testing
import TestSupport

/// Issue 35's "done when": a gRPC service and a WebSocket service each work through the gateway with App Check
/// enforced, from `Config/gateway.example.yaml` as shipped (only its listener, key set and cache file pointed at
/// this test's; its variables set as a user sets them).
@Suite(.serialized) struct GRPCExampleConfigTests {
    @Test func grpcAndWebSocketRoutesOfTheExampleWork() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let scripts = try GRPCPeers.Scripts()
        let grpc = try GRPCPeers.Upstream(scripts)
        defer { grpc.stop() }
        let ws = try WebSocketTests.PythonUpstream("ws")
        defer { ws.stop() }
        let example = try String(contentsOf: ConfigWarningTests.repoRoot.appendingPathComponent("Config/gateway.example.yaml"),
                                 encoding: .utf8)
        var text = example
        for (from, to) in [
            ("listen: [\"0.0.0.0:8080\"]", "listen: [\"127.0.0.1:0\"]"),
            ("url: https://firebaseappcheck.googleapis.com/v1/jwks", "url: \(issuer.jwksURL)"),
            ("cache_file: /var/lib/appcheck-gateway/jwks.json", "cache_file: \"\""),
        ] {
            #expect(text.contains(from), "the example no longer has \(from)")
            text = text.replacingOccurrences(of: from, with: to)
        }
        let h = try GatewayHarness(environment: [
            "FIREBASE_PROJECT_NUMBER": "123456789012", "FIREBASE_PROJECT_ID": AppCheckEndToEndTests.projectId,
            "ADMIN_LISTEN": "127.0.0.1:0", "UPSTREAM_URL": ws.url, "GRPC_UPSTREAM_URL": grpc.url,
        ]) { _ in text }
        defer { h.stop() }
        try h.waitUntilReady()
        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)

        let call = try scripts.call(h.port, "/chat.v1.ChatService/Chat", kind: "pingpong", requests: [[1], [2]],
                                    metadata: [("x-firebase-appcheck", token)])
        #expect(call.code == "OK", "\(call) \(h.logLines().suffix(3))")
        #expect(call.responses == [[1], [2]])
        let refused = try scripts.call(h.port, "/chat.v1.ChatService/Unary")
        #expect(refused.code == "UNAUTHENTICATED")
        #expect(refused.details == "app_check_token_missing: missing")
        #expect(try grpc.calls().count == 1)

        let tunnel = try ws.client(h.port, "/v1/live", token: token)
        #expect(tunnel["status"] as? Int == 101, "\(tunnel)")
        #expect(tunnel["text"] as? String == "hello")
        let missing = try ws.client(h.port, "/v1/live")
        #expect(missing["status"] as? Int == 401)
        #expect(ws.requests.count == 1, "only the checked handshake reached the upstream")
    }
}
