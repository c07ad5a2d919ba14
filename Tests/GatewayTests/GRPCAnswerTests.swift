import AppCheck
import Foundation
import Glibc
@testable import Gateway
import Testing
import TestSupport

/// Everything the gateway answers itself on a gRPC call is in gRPC form (SPEC §6.1): HTTP 200, Trailers-Only,
/// `grpc-status`, `grpc-message` and `x-request-id`, as the grpcio client (Debian's python3-grpcio) reads them; the
/// same checks, log lines and metrics as any request. gRPC-Web and gRPC over HTTP/1.1 keep JSON refusals.
@Suite(.serialized) struct GRPCAnswerTests {
    /// An upstream that takes connections and bytes and never answers, so a refusal that comes from the request
    /// itself (its body over the limit) cannot race an upstream's answer.
    static func silentUpstream() throws -> ThreadPerConnectionServer {
        try ThreadPerConnectionServer { fd in
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&pfd, 1, 100)
                if ready < 0 { return }
                if ready == 0 { continue }
                if read(fd, &buffer, buffer.count) <= 0 { return }
            }
        }
    }

    /// Routes to an `h2` upstream (silent: nothing here reaches it) and one to the harness's `http1` upstream.
    static func harness(_ issuer: LocalIssuer, _ silent: ThreadPerConnectionServer) throws -> GatewayHarness {
        let h = try GatewayHarness {
            GatewayHarness.config(upstream: $0, routes: """
              - { name: greeter, prefix: /test.Echo/, upstream: grpc, enforcement: enforce }
              - { name: small, prefix: /test.Small/, upstream: grpc, enforcement: off, max_body_bytes: 64 }
              - { name: attested, prefix: /test.Attested/, upstream: grpc, enforcement: enforce, providers: [app_attest] }
              - { name: legacy, prefix: /test.Legacy/, upstream: api, enforcement: enforce }
            """, appCheck: """
              project_id: "\(AppCheckEndToEndTests.projectId)"
              jwks:
                url: \(issuer.jwksURL)
            """, upstreamExtra: """
              grpc:
                url: \(silent.url)
                protocol: h2
                response_timeout: 20s
            """)
        }
        try h.waitUntilReady()
        return h
    }

    /// The access-log line of the request with this id (waited for: lines are written in batches).
    static func logLine(_ h: GatewayHarness, requestId: String) throws -> [String: Any] {
        guard h.logged("\"request_id\":\"\(requestId)\"", timeout: 10) else { throw HarnessError("no log line for \(requestId)") }
        guard let line = h.logLines().first(where: {
            $0.contains("\"request_id\":\"\(requestId)\"") && $0.contains("\"message\":\"request\"")
        }) else { throw HarnessError("no request line for \(requestId)") }
        guard let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw HarnessError("not JSON: \(line)")
        }
        return obj
    }

    /// App Check refusals: missing (with the exact message), a malformed token, a provider the route does not list
    /// (401 on plain HTTP, so 16 too); each carries an `x-request-id` (the client's, when it sent a valid one) and is
    /// logged and counted like the same refusal over HTTP/1.1, with its `grpc_status`.
    @Test func appCheckRefusalsAreUnauthenticated() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let silent = try Self.silentUpstream()
        defer { silent.stop() }
        let h = try Self.harness(issuer, silent)
        defer { h.stop() }
        let scripts = try GRPCPeers.Scripts()

        let missing = try scripts.call(h.port, "/test.Echo/Unary", requests: [[1, 2, 3]])
        #expect(missing.code == "UNAUTHENTICATED", "\(missing)")
        #expect(missing.details == "app_check_token_missing: missing")
        let id = try #require(missing.trailing("x-request-id").first, "\(missing.trailing)")
        #expect(!id.isEmpty)
        #expect(missing.initial.isEmpty, "Trailers-Only: no separate head")
        let line = try Self.logLine(h, requestId: id)
        #expect(line["status"] as? Int == 401)
        #expect(line["grpc_status"] as? Int == 16)
        #expect(line["outcome"] as? String == "unknown_origin", "a missing token's console category")
        #expect(line["reason"] as? String == "missing")
        #expect(line["route"] as? String == "greeter")
        #expect(line["path"] as? String == "/test.Echo/Unary")

        let bad = try scripts.call(h.port, "/test.Echo/Unary", metadata: [("x-firebase-appcheck", "not.a.token"),
                                                                           ("x-request-id", "grpc-test-1")])
        #expect(bad.code == "UNAUTHENTICATED", "\(bad)")
        #expect(bad.details == "app_check_token_invalid: malformed")
        #expect(bad.trailing("x-request-id") == ["grpc-test-1"])
        #expect(try Self.logLine(h, requestId: "grpc-test-1")["outcome"] as? String == "invalid")

        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)
        let provider = try scripts.call(h.port, "/test.Attested/Unary", metadata: [("x-firebase-appcheck", token)])
        #expect(provider.code == "UNAUTHENTICATED", "\(provider)")
        #expect(provider.details == "app_check_token_invalid: provider_not_allowed")
        #expect(silent.connections == 0, "no refused call reached the upstream")

        let metrics = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains("gateway_requests_total{route=\"greeter\",status=\"401\"} 2\n"), "\(metrics)")
    }

    /// No route: 12 UNIMPLEMENTED `no_route`; a body over the route's `max_body_bytes`: 8 RESOURCE_EXHAUSTED; a
    /// malformed `grpc-timeout` (curl, since grpcio sends only valid ones): 3 INVALID_ARGUMENT.
    @Test func noRouteBodyTooLargeAndBadTimeout() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let silent = try Self.silentUpstream()
        defer { silent.stop() }
        let h = try Self.harness(issuer, silent)
        defer { h.stop() }
        let scripts = try GRPCPeers.Scripts()

        let none = try scripts.call(h.port, "/other.Service/Method")
        #expect(none.code == "UNIMPLEMENTED", "\(none)")
        #expect(none.details == "no_route")
        #expect(none.trailing("x-request-id").count == 1)

        let r = try Run.command("curl", [
            "-sS", "-i", "--http2-prior-knowledge", "--max-time", "10", "-H", "content-type: application/grpc",
            "-H", "grpc-timeout: 1.5S", "-H", "te: trailers", "--data-binary", "@/dev/null",
            "http://127.0.0.1:\(h.port)/test.Small/Unary",
        ])
        let head = r.stdout.lowercased()
        #expect(head.hasPrefix("http/2 200"), "\(r.stdout) \(r.stderr)")
        #expect(head.contains("content-type: application/grpc\r\n"))
        #expect(head.contains("grpc-status: 3\r\n"))
        #expect(head.contains("grpc-message: bad_request: grpc_timeout_invalid\r\n"))
        #expect(head.contains("x-request-id: "))
        #expect(!head.contains("content-length"), "Trailers-Only has no body and says nothing of one")
        #expect(silent.connections == 0, "no refused call reached the upstream")

        // The body outgrows the `off` route's limit while its head waits at the (silent) upstream.
        let big = try scripts.call(h.port, "/test.Small/Unary", requests: [[UInt8](repeating: 7, count: 1000)])
        #expect(big.code == "RESOURCE_EXHAUSTED", "\(big)")
        #expect(big.details == "body_too_large", "the reason repeats the error: said once")
        let bigLine = try Self.logLine(h, requestId: try #require(big.trailing("x-request-id").first))
        #expect(bigLine["status"] as? Int == 413)
        #expect(bigLine["grpc_status"] as? Int == 8)
    }

    /// A key-bound token without its proof (`dpop` metadata): 16 with the DPoP reason and the challenge as metadata.
    @Test func dpopRefusalCarriesItsChallenge() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let silent = try Self.silentUpstream()
        defer { silent.stop() }
        let h = try Self.harness(issuer, silent)
        defer { h.stop() }
        let scripts = try GRPCPeers.Scripts()
        let key = try #require(DPoPPrivateKey.generate())
        let token = try DPoPEndToEndTests.token(issuer, boundTo: key)
        let r = try scripts.call(h.port, "/test.Echo/Unary", metadata: [("x-firebase-appcheck", token)])
        #expect(r.code == "UNAUTHENTICATED", "\(r)")
        #expect(r.details == "app_check_token_invalid: dpop_missing")
        #expect(r.trailing("www-authenticate") == ["DPoP error=\"invalid_dpop_proof\""], "\(r.trailing)")
        #expect(silent.connections == 0)
    }

    /// `grpc-timeout` passing before any response head (the upstream is silent, its `response_timeout` far away):
    /// the gateway ends the call itself with 4 DEADLINE_EXCEEDED, Trailers-Only. curl, which keeps no deadline of
    /// its own (grpcio would end the call itself and hide the gateway's answer).
    @Test func grpcTimeoutBeforeTheHeadIsDeadlineExceeded() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let silent = try Self.silentUpstream()
        defer { silent.stop() }
        let h = try Self.harness(issuer, silent)
        defer { h.stop() }
        let r = try Run.command("curl", [
            "-sS", "-i", "--http2-prior-knowledge", "--max-time", "15", "-H", "content-type: application/grpc",
            "-H", "grpc-timeout: 300m", "-H", "te: trailers", "-H", "x-request-id: deadline-1", "--data-binary",
            "@/dev/null", "http://127.0.0.1:\(h.port)/test.Small/Unary",
        ])
        let head = r.stdout.lowercased()
        #expect(head.hasPrefix("http/2 200"), "\(r.stdout) \(r.stderr)")
        #expect(head.contains("grpc-status: 4\r\n"), "\(r.stdout)")
        #expect(head.contains("grpc-message: deadline_exceeded: grpc_timeout\r\n"))
        #expect(head.contains("x-request-id: deadline-1\r\n"))
        let line = try Self.logLine(h, requestId: "deadline-1")
        #expect(line["status"] as? Int == 504)
        #expect(line["grpc_status"] as? Int == 4)
        #expect(line["outcome"] as? String == "skipped", "an off route: the log's reason stays App Check's (none)")
        #expect(silent.connections == 1, "the call had gone to the upstream")
    }

    /// A gRPC call routed to an `http1` upstream: 14 UNAVAILABLE `upstream_not_h2`, logged, never forwarded, and no
    /// token spent on it (refused before the App Check step).
    @Test func grpcToAnHTTP1UpstreamIsUnavailable() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let silent = try Self.silentUpstream()
        defer { silent.stop() }
        let h = try Self.harness(issuer, silent)
        defer { h.stop() }
        let scripts = try GRPCPeers.Scripts()
        let token = try issuer.mint(appId: AppCheckEndToEndTests.appId)
        let r = try scripts.call(h.port, "/test.Legacy/Unary", requests: [[1]], metadata: [("x-firebase-appcheck", token)])
        #expect(r.code == "UNAVAILABLE", "\(r)")
        #expect(r.details == "upstream_unavailable: upstream_not_h2")
        let line = try Self.logLine(h, requestId: try #require(r.trailing("x-request-id").first))
        #expect(line["status"] as? Int == 502)
        #expect(line["grpc_status"] as? Int == 14)
        #expect(line["reason"] as? String == "upstream_not_h2")
        #expect(line["route"] as? String == "legacy")
        #expect(h.upstream.requestCount == 0 && h.upstream.connectionCount == 0, "never forwarded")
        // The same path without the gRPC content type is an ordinary request, forwarded (its token verified).
        let plain = try Run.command("curl", [
            "-sS", "--http2-prior-knowledge", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}",
            "-H", "x-firebase-appcheck: \(token)", "http://127.0.0.1:\(h.port)/test.Legacy/Unary",
        ])
        #expect(plain.stdout == "200", "\(plain.stdout) \(plain.stderr)")
        #expect(h.upstream.requestCount == 1)
    }

    /// gRPC-Web (any transport) and `application/grpc` over HTTP/1.1 are not gRPC calls: JSON refusals as usual.
    @Test func grpcWebAndHTTP1KeepJSON() throws {
        let issuer = try LocalIssuer()
        defer { issuer.stop() }
        let silent = try Self.silentUpstream()
        defer { silent.stop() }
        let h = try Self.harness(issuer, silent)
        defer { h.stop() }
        let url = "http://127.0.0.1:\(h.port)/test.Echo/Unary"
        for (version, contentType) in [("--http2-prior-knowledge", "application/grpc-web+proto"),
                                       ("--http2-prior-knowledge", "application/grpc-web-text"),
                                       ("--http1.1", "application/grpc"), ("--http1.1", "application/grpc-web")] {
            // No body: curl 7.88 takes the RST_STREAM(NO_ERROR) that follows an answer given before the request
            // body ended (RFC 9113 §8.1) for an error.
            let r = try Run.command("curl", ["-sS", "-i", version, "--max-time", "10", "-H", "content-type: \(contentType)",
                                             "-X", "POST", url])
            let text = r.stdout.lowercased()
            #expect(text.contains(" 401"), "\(version) \(contentType): \(r.status) \(r.stdout) \(r.stderr)")
            #expect(text.contains("content-type: application/json"), "\(version) \(contentType)")
            #expect(text.contains("\"error\":\"app_check_token_missing\""), "\(version) \(contentType)")
            #expect(!text.contains("grpc-status"), "\(version) \(contentType)")
        }
    }
}
