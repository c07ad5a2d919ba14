import AppCheck
import Foundation
import Glibc
@testable import Gateway
import Testing
import TestSupport

/// gRPC through the gateway to an HTTP/2 upstream (SPEC §6.1), with App Check enforced, between a grpcio client and a
/// grpcio server (Debian's python3-grpcio) nobody here wrote: the four call kinds, limited-use tokens, the upstream's
/// status and trailing metadata, `grpc-timeout` forwarded and enforced (against a bare python3-h2 server that keeps
/// no deadline of its own, so the reset it logs is the gateway's), and DPoP proofs as `dpop` metadata.
@Suite(.serialized) struct GRPCEndToEndTests {
    static func harness(_ issuer: LocalIssuer, grpc: GRPCPeers.Upstream, raw: GRPCPeers.Upstream? = nil) throws -> GatewayHarness {
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: echo, prefix: /test.Echo/, upstream: grpc, enforcement: enforce }
              - { name: once, prefix: /test.Once/, upstream: grpc, enforcement: enforce, replay_protection: true }
              - { name: bound, prefix: /test.Bound/, upstream: grpc, enforcement: enforce, dpop: required }
              - { name: open, prefix: /test.Open/, upstream: grpc, enforcement: off }
              - { name: raw, prefix: /test.Raw/, upstream: raw, enforcement: off }
            """, appCheck: """
              project_id: "\(AppCheckEndToEndTests.projectId)"
              clock_skew: 0s
              jwks:
                url: \(issuer.jwksURL)
            """, upstreamExtra: """
              grpc:
                url: \(grpc.url)
                protocol: h2
                response_timeout: 20s
              raw:
                url: \((raw ?? grpc).url)
                protocol: h2
                response_timeout: 20s
            """)
        }
        try h.waitUntilReady()
        // The memory replay store refuses limited-use tokens minted before it came up (docs/replay.md).
        ReplayE2E.waitForNextSecond()
        return h
    }

    static func value(_ list: [(String, String)], _ name: String) -> [String] { list.filter { $0.0 == name }.map(\.1) }

    /// Unary, server-streaming, client-streaming, bidirectional (all at once, and ping-pong: each message sent only
    /// after the answer to the previous one came back through the gateway) with a verified token in the
    /// `x-firebase-appcheck` metadata; the upstream's initial and trailing metadata reach the client; the upstream
    /// sees the verdict and not the token; a call without a token never reaches it.
    @Test func allFourCallKindsWithAppCheckEnforced() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let scripts = try GRPCPeers.Scripts()
        let grpc = try GRPCPeers.Upstream(scripts)
        defer { grpc.stop() }
        let h = try Self.harness(issuer, grpc: grpc)
        defer { h.stop() }
        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)
        let md = [("x-firebase-appcheck", token)]

        let unary = try scripts.call(h.port, "/test.Echo/Unary", requests: [[1, 2, 3]], metadata: md)
        #expect(unary.code == "OK", "\(unary) \(h.logLines().suffix(3))")
        #expect(unary.responses == [[1, 2, 3]])
        #expect(unary.initial("x-initial") == ["hello"])
        #expect(unary.trailing("x-trailing") == ["bye"])
        let unaryId = try #require(unary.initial("x-request-id").first, "the response head carries the request id")
        let unaryLine = try GRPCAnswerTests.logLine(h, requestId: unaryId)
        #expect(unaryLine["status"] as? Int == 200)
        #expect(unaryLine["grpc_status"] as? Int == 0, "the upstream's, from its trailers")
        #expect(unaryLine["outcome"] as? String == "verified")

        let stream = try scripts.call(h.port, "/test.Echo/Count", kind: "server_stream", requests: [[5]], metadata: md)
        #expect(stream.code == "OK", "\(stream)")
        #expect(stream.responses == [[0], [1], [2], [3], [4]])

        let sum = try scripts.call(h.port, "/test.Echo/Sum", kind: "client_stream", requests: [[1], [2, 3], [4, 5, 6]],
                                   metadata: md)
        #expect(sum.code == "OK", "\(sum)")
        #expect(sum.responses == [Array("6".utf8)])

        let chat = try scripts.call(h.port, "/test.Echo/Chat", kind: "bidi", requests: [[1], [2], [3]], metadata: md)
        #expect(chat.code == "OK", "\(chat)")
        #expect(chat.responses == [[1], [2], [3]])

        let big = [UInt8](repeating: 0xAB, count: 300_000)
        let pingpong = try scripts.call(h.port, "/test.Echo/Chat", kind: "pingpong", requests: [[1], big, [3]], metadata: md)
        #expect(pingpong.code == "OK", "\(pingpong.code) \(pingpong.details)")
        #expect(pingpong.responses == [[1], big, [3]])

        let calls = try grpc.calls()
        #expect(calls.map(\.method) == ["Unary", "Count", "Sum", "Chat", "Chat"])
        for call in calls {
            #expect(Self.value(call.metadata, "x-appcheck-status") == ["verified"], "\(call.metadata)")
            #expect(Self.value(call.metadata, "x-appcheck-app-id") == [AppCheckEndToEndTests.appId])
            #expect(Self.value(call.metadata, "x-firebase-appcheck").isEmpty, "the token is not forwarded")
        }

        let refused = try scripts.call(h.port, "/test.Echo/Unary", requests: [[1]])
        #expect(refused.code == "UNAUTHENTICATED")
        #expect(try grpc.calls().count == calls.count, "a refused call never reaches the upstream")
    }

    /// On a replay-protected route a limited-use token makes one call; the second is 16 `reused`.
    @Test func limitedUseTokenIsConsumedOnce() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let scripts = try GRPCPeers.Scripts()
        let grpc = try GRPCPeers.Upstream(scripts)
        defer { grpc.stop() }
        let h = try Self.harness(issuer, grpc: grpc)
        defer { h.stop() }
        let limited = try issuer.mint(appId: AppCheckEndToEndTests.appId, ttl: 300, jti: UUID().uuidString)
        let first = try scripts.call(h.port, "/test.Once/Unary", requests: [[9]], metadata: [("x-firebase-appcheck", limited)])
        #expect(first.code == "OK", "\(first)")
        let again = try scripts.call(h.port, "/test.Once/Unary", requests: [[9]], metadata: [("x-firebase-appcheck", limited)])
        #expect(again.code == "UNAUTHENTICATED", "\(again)")
        #expect(again.details == "app_check_token_reused: reused")
        #expect(try grpc.calls().count == 1)
    }

    /// The upstream's own non-OK status, its percent-encoded message and custom trailing metadata (text and binary)
    /// reach the client unchanged, its Trailers-Only answer still one HEADERS frame; the log line has its status.
    @Test func upstreamStatusAndTrailersAreRelayed() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let scripts = try GRPCPeers.Scripts()
        let grpc = try GRPCPeers.Upstream(scripts)
        defer { grpc.stop() }
        let h = try Self.harness(issuer, grpc: grpc)
        defer { h.stop() }
        let r = try scripts.call(h.port, "/test.Open/Fail", requests: [[1]])
        #expect(r.code == "NOT_FOUND", "\(r)")
        #expect(r.details == "no such thing: 100%")
        #expect(r.trailing("x-custom") == ["kept"])
        #expect(r.trailing("x-custom-bin") == ["0001"])
        let id = try #require(r.trailing("x-request-id").first, "Trailers-Only: the request id is with the status")
        #expect(try GRPCAnswerTests.logLine(h, requestId: id)["grpc_status"] as? Int == 5)
        #expect(try grpc.calls().map(\.method) == ["Fail"])
    }

    /// `grpc-timeout` reaches the upstream (the grpcio server gets a deadline from it), and bounds the call at the
    /// gateway: before the head (Trailers-Only 4) and after it (the message relayed, then trailing HEADERS with 4),
    /// each time with the upstream's stream reset. nghttp shows the frames; the bare upstream keeps no deadline, so
    /// the reset it logs is the gateway's.
    @Test func grpcTimeoutIsForwardedAndEnforced() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let scripts = try GRPCPeers.Scripts()
        let grpc = try GRPCPeers.Upstream(scripts)
        defer { grpc.stop() }
        let raw = try GRPCPeers.Upstream(scripts, raw: true)
        defer { raw.stop() }
        let h = try Self.harness(issuer, grpc: grpc, raw: raw)
        defer { h.stop() }

        let timed = try scripts.call(h.port, "/test.Open/Unary", requests: [[1]], timeout: 30)
        #expect(timed.code == "OK", "\(timed)")
        let remaining = try #require(try grpc.events().first?["time_remaining"] as? Double)
        #expect(remaining > 0 && remaining <= 30, "the upstream got the call's deadline: \(remaining)")

        let body = scripts.directory + "/empty-message"
        try Data([0, 0, 0, 0, 0]).write(to: URL(fileURLWithPath: body))
        func nghttp(_ path: String) throws -> [String] {
            let r = try BoundedCommand.run("/usr/bin/nghttp", [
                "-v", "-H", "content-type: application/grpc", "-H", "te: trailers", "-H", "grpc-timeout: 400m",
                "-d", body, "http://127.0.0.1:\(h.port)\(path)",
            ], timeout: 20)
            return r.stdout.split(separator: "\n").map(String.init)
        }
        func fields(_ lines: [String]) -> [String] {
            lines.compactMap { line in line.range(of: ") ").map { String(line[$0.upperBound...]) } }
                .filter { !$0.hasPrefix(":") || $0.hasPrefix(":status") }
        }

        // Before the head: one HEADERS frame, END_STREAM, grpc-status 4.
        let hang = try nghttp("/test.Raw/Hang")
        let hangFields = fields(hang.filter { $0.contains("recv (stream_id=") })
        #expect(hangFields.contains(":status: 200"), "\(hang)")
        #expect(hangFields.contains("grpc-status: 4"), "\(hang)")
        #expect(hangFields.contains("grpc-message: deadline_exceeded: grpc_timeout"), "\(hang)")
        #expect(hang.filter { $0.contains("recv HEADERS frame") }.count == 1, "Trailers-Only: \(hang)")
        #expect(!hang.contains { $0.contains("recv DATA frame") }, "\(hang)")
        func resets(_ events: [[String: Any]]) -> Int { events.filter { $0["event"] as? String == "reset" }.count }
        let hangEvents = try raw.waitForEvents { resets($0) >= 1 }
        #expect(resets(hangEvents) == 1, "the upstream stream was reset: \(hangEvents)")
        let forwarded = try #require(hangEvents.first { $0["event"] as? String == "request" })
        let headers = (forwarded["headers"] as? [[String]] ?? []).compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
        #expect(Self.value(headers, "grpc-timeout") == ["400m"], "forwarded unchanged: \(headers)")
        #expect(Self.value(headers, "te") == ["trailers"], "\(headers)")

        // After the head: the head and the message, then trailing HEADERS with grpc-status 4.
        let stall = try nghttp("/test.Raw/Stall")
        let stallFields = fields(stall.filter { $0.contains("recv (stream_id=") })
        #expect(stallFields.first == ":status: 200", "\(stall)")
        #expect(stall.contains { $0.contains("recv DATA frame <length=10") }, "\(stall)")
        #expect(stall.filter { $0.contains("recv HEADERS frame") }.count == 2, "a head, then trailers: \(stall)")
        #expect(stallFields.contains("grpc-status: 4"), "\(stall)")
        #expect(stallFields.contains("grpc-message: deadline_exceeded: grpc_timeout"), "\(stall)")
        let stallEvents = try raw.waitForEvents { resets($0) >= 2 }
        #expect(resets(stallEvents) == 2, "the upstream stream was reset: \(stallEvents)")
    }

    /// A bidirectional call whose client pauses longer than `body_timeout` between messages, on a route with
    /// `stream_idle_timeout`: once the response head has arrived the idle bound replaces the request-body gap (SPEC
    /// §6.1), so the call completes; on a route without it, the same pauses end the call.
    @Test func streamIdleTimeoutReplacesTheBodyGapOfAStreamingCall() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let scripts = try GRPCPeers.Scripts()
        let grpc = try GRPCPeers.Upstream(scripts)
        defer { grpc.stop() }
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: chat, prefix: /chat.v1.ChatService/, upstream: grpc, enforcement: off, stream_idle_timeout: 20s }
              - { name: open, prefix: /test.Open/, upstream: grpc, enforcement: off }
            """, limits: ["body_timeout": "1s"], appCheck: """
              project_id: "\(AppCheckEndToEndTests.projectId)"
              jwks:
                url: \(issuer.jwksURL)
            """, upstreamExtra: """
              grpc:
                url: \(grpc.url)
                protocol: h2
                response_timeout: 20s
            """)
        }
        defer { h.stop() }
        try h.waitUntilReady()
        let streamed = try scripts.call(h.port, "/chat.v1.ChatService/Chat", kind: "pingpong", requests: [[1], [2], [3]],
                                        pause: 1.6)
        #expect(streamed.code == "OK", "\(streamed.code) \(streamed.details) \(h.logLines().suffix(3))")
        #expect(streamed.responses == [[1], [2], [3]])
        let cut = try scripts.call(h.port, "/test.Open/Chat", kind: "pingpong", requests: [[1], [2], [3]], pause: 1.6)
        #expect(cut.code != "OK", "without stream_idle_timeout body_timeout still bounds the gap: \(cut.code)")
    }

    /// A key-bound token on a `dpop: required` route: accepted with a proof for the very call in the `dpop` metadata
    /// (`htm` POST, `htu` from `:authority` and the method path), refused without one and when the proof is replayed;
    /// the proof is not forwarded.
    @Test func dpopBoundTokenNeedsItsProofAsMetadata() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let scripts = try GRPCPeers.Scripts()
        let grpc = try GRPCPeers.Upstream(scripts)
        defer { grpc.stop() }
        let h = try Self.harness(issuer, grpc: grpc)
        defer { h.stop() }
        let key = try #require(DPoPPrivateKey.generate())
        let token = try DPoPEndToEndTests.token(issuer, boundTo: key)
        let htu = "http://127.0.0.1:\(h.port)/test.Bound/Unary"
        let proof = try DPoPEndToEndTests.proof(key, htm: "POST", htu: htu, token: token)

        let ok = try scripts.call(h.port, "/test.Bound/Unary", requests: [[7]],
                                  metadata: [("x-firebase-appcheck", token), ("dpop", proof)])
        #expect(ok.code == "OK", "\(ok) \(h.logLines().suffix(2))")
        let seen = try #require(try grpc.calls().last)
        #expect(Self.value(seen.metadata, "dpop").isEmpty, "the proof is not forwarded")
        #expect(Self.value(seen.metadata, "x-appcheck-status") == ["verified"])

        let bare = try scripts.call(h.port, "/test.Bound/Unary", metadata: [("x-firebase-appcheck", token)])
        #expect(bare.code == "UNAUTHENTICATED")
        #expect(bare.details == "app_check_token_invalid: dpop_missing")
        let replayed = try scripts.call(h.port, "/test.Bound/Unary", metadata: [("x-firebase-appcheck", token), ("dpop", proof)])
        #expect(replayed.code == "UNAUTHENTICATED")
        #expect(replayed.details == "app_check_token_invalid: dpop_reused")
        let wrongPath = try DPoPEndToEndTests.proof(key, htm: "POST", htu: "http://127.0.0.1:\(h.port)/test.Bound/Other", token: token)
        let elsewhere = try scripts.call(h.port, "/test.Bound/Unary", metadata: [("x-firebase-appcheck", token), ("dpop", wrongPath)])
        #expect(elsewhere.details == "app_check_token_invalid: dpop_invalid")
        #expect(try grpc.calls().count == 1, "only the call with its proof reached the upstream")
    }
}
