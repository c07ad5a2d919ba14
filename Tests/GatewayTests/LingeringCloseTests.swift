import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// A request refused before its body was read (413 on a declared length, a chunked body past the limit) is answered
/// and the connection closed without a reset: the gateway shuts its sending side and drops what the client still
/// sends (lingering close, docs/behaviour.md), so a client that writes its whole body before reading sees the answer.
/// Closing at once with bytes unread made the kernel reset the connection: the client's write failed and the answer
/// was lost (a CI run of `IssuerEndToEndTests` saw it with a 1 MB body).
@Suite struct LingeringCloseTests {
    static let pki = Result { try TestPKI() }

    static func harness() throws -> GatewayHarness {
        let pki = try Self.pki.get()
        return try GatewayHarness {
            GatewayHarness.config(
                upstream: $0,
                routes: """
                  - { name: small, prefix: /, upstream: api, enforcement: off, max_body_bytes: 1KiB }
                """,
                server: """
                  tls:
                    listen: ["127.0.0.1:0"]
                    certificate: \(pki.cert)
                    private_key: \(pki.key)
                """,
                limits: ["body_timeout": "30s"])
        }
    }

    /// Sends `head` and then `body` from another thread (blocking writes, as a simple client does), while this
    /// thread reads the answer. Returns the answer and whether every byte of the body could be written.
    static func sendWholeBodyThenRead(port: UInt16, head: String, body: [UInt8]) throws -> (TestResponse, Bool) {
        let c = try RawHTTPClient(port: port, timeout: 20)
        try c.send(head)
        let sent = Mutex<Bool?>(nil)
        let fd = c.fd
        let writer = Thread {
            var offset = 0
            while offset < body.count {
                let n = body[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break }
                offset += n
            }
            sent.withLock { $0 = offset == body.count }
        }
        writer.start()
        let response = try c.readResponse(requestMethod: "POST")
        var waited = 0
        while sent.withLock({ $0 }) == nil && waited < 2000 { usleep(10_000); waited += 1 }
        #expect(c.waitForClose(timeout: 15), "the gateway closes once the body is in")
        return (response, sent.withLock { $0 } ?? false)
    }

    @Test func aDeclaredBodyOverTheLimitIsAnsweredAndDrained() throws {
        let h = try Self.harness()
        defer { h.stop() }
        let body = [UInt8](repeating: 0x61, count: 8 << 20)
        let (r, sentAll) = try Self.sendWholeBodyThenRead(
            port: h.port, head: "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: \(body.count)\r\n\r\n", body: body)
        #expect(r.status == 413 && r.bodyText.contains("body_too_large"), "\(r.status) \(r.bodyText)")
        #expect(sentAll, "the client's write of its 8 MiB body failed: the gateway reset the connection")
        #expect(h.upstream.requestCount == 0)
    }

    @Test func aChunkedBodyPastTheLimitIsAnsweredAndDrained() throws {
        let h = try Self.harness()
        defer { h.stop() }
        var body: [UInt8] = []
        let chunk = [UInt8](repeating: 0x62, count: 64 * 1024)
        for _ in 0..<64 { body += Array("10000\r\n".utf8) + chunk + [13, 10] }
        body += Array("0\r\n\r\n".utf8)
        let (r, sentAll) = try Self.sendWholeBodyThenRead(
            port: h.port, head: "POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", body: body)
        #expect(r.status == 413, "\(r.status) \(r.bodyText)")
        #expect(sentAll, "the client's write of its 4 MiB chunked body failed: the gateway reset the connection")
    }

    /// curl over HTTP/1.1, plain and over TLS, uploading 8 MiB to the refusing route: the answer, and no error.
    @Test(arguments: ["http", "https"])
    func curlUploadingToARefusingRouteGetsTheAnswer(scheme: String) throws {
        let h = try Self.harness()
        defer { h.stop() }
        let pki = try Self.pki.get()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("linger-\(UUID().uuidString)")
        try Data(repeating: 0x63, count: 8 << 20).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let port = scheme == "https" ? (h.server.tlsListenAddresses.first?.port ?? 0) : h.port
        let result = try Run.command("curl", [
            "-sS", "--http1.1", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", pki.caCert,
            "-H", "Expect:", "--data-binary", "@\(file.path)", "\(scheme)://127.0.0.1:\(port)/upload",
        ], timeout: 60)
        #expect(result.status == 0 && result.stdout == "413", "curl \(result.status): \(result.stdout) \(result.stderr)")
    }
}
