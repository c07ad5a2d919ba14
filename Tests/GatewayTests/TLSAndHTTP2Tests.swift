import EventLoop
import Foundation
import Glibc
import Testing
import TestSupport

/// TLS termination with App Transport Security defaults and HTTP/2 (docs/behaviour.md, TLS; issue 5), end to end with
/// real clients: curl, openssl s_client, h2load, and raw HTTP/2 frames.
@Suite(.serialized) struct TLSAndHTTP2Tests {
    static let routes = """
      - name: open
        prefix: /
        upstream: api
        enforcement: off
        max_body_bytes: 20MiB
    """

    /// `responseTimeout` replaces the harness's 2 s for tests whose debug-build sample upstream needs longer to
    /// produce a large body on a loaded machine (timeouts are not what those tests are about).
    static func harness(_ pki: TestPKI, upstream: String? = nil, upstreamExtra: String = "",
                        responseTimeout: String = "2s") throws -> GatewayHarness {
        try GatewayHarness {
            GatewayHarness.config(upstream: upstream ?? $0, routes: routes, server: """
              tls:
                listen: ["127.0.0.1:0"]
                certificate: \(pki.cert)
                private_key: \(pki.key)
            """, upstreamExtra: upstreamExtra)
            .replacingOccurrences(of: "response_timeout: 2s", with: "response_timeout: \(responseTimeout)")
        }
    }

    var tlsPort: (GatewayHarness) -> UInt16 { { $0.server.tlsListenAddresses.first?.port ?? 0 } }

    func curl(_ args: [String]) throws -> ProcessResult {
        try Run.command("curl", ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{http_version}"] + args, timeout: 60)
    }

    @Test func curlSpeaksHTTP2AndHTTP1OverTLSAndH2COnThePlainPort() throws {
        let pki = try TestPKI()
        let h = try Self.harness(pki)
        defer { h.stop() }
        let url = "https://127.0.0.1:\(tlsPort(h))/x"
        #expect(try curl(["--cacert", pki.caCert, "--http2", url]).stdout == "200 2")
        #expect(try curl(["--cacert", pki.caCert, "--http1.1", url]).stdout == "200 1.1")
        #expect(h.upstream.receivedHeads.last?.contains("X-Forwarded-Proto: https\n") == true)
        #expect(try curl(["--http2-prior-knowledge", "http://127.0.0.1:\(h.port)/x"]).stdout == "200 2")
        #expect(try curl(["--http1.1", "http://127.0.0.1:\(h.port)/x"]).stdout == "200 1.1")
    }

    func sClient(_ port: UInt16, _ args: [String]) throws -> ProcessResult {
        try Run.command("openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost"] + args,
                        input: Data("Q\n".utf8), timeout: 20)
    }

    /// `openssl s_server` on a free port with the given options; killed by the caller.
    func sServer(_ pki: TestPKI, _ args: [String]) throws -> (Process, UInt16) {
        let port = try TestPKI.freePort()
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", pki.cert, "-key", pki.key, "-www"] + args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        p.standardInput = Pipe()
        try p.runHoldingEnvironment()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if (try? RawHTTPClient(port: port, timeout: 1)) != nil { return (p, port) }
            usleep(20_000)
        }
        kill(p.processIdentifier, SIGKILL)
        throw HarnessError("openssl s_server did not start")
    }

    @Test func tls11AndNonForwardSecretSuitesAreRefused() throws {
        let pki = try TestPKI()
        let h = try Self.harness(pki)
        defer { h.stop() }
        // The control: this client really can speak TLS 1.1 and a non-ECDHE suite (a server that allows them).
        let (weak, weakPort) = try sServer(pki, ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        defer { kill(weak.processIdentifier, SIGKILL); weak.waitUntilExit() }
        let control = try sClient(weakPort, ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        #expect(control.stdout.contains("Protocol  : TLSv1.1") || control.stdout.contains("TLSv1.1"), "control: \(control.stdout.suffix(400))")
        let (rsa, rsaPort) = try sServer(pki, ["-tls1_2", "-cipher", "AES128-GCM-SHA256"])
        defer { kill(rsa.processIdentifier, SIGKILL); rsa.waitUntilExit() }
        let rsaControl = try sClient(rsaPort, ["-tls1_2", "-cipher", "AES128-GCM-SHA256"])
        #expect(rsaControl.stdout.contains("AES128-GCM-SHA256"), "control: \(rsaControl.stdout.suffix(400))")

        let port = tlsPort(h)
        let old = try sClient(port, ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        #expect(old.status != 0)
        #expect(old.stdout.contains("Cipher is (NONE)"), "\(old.stdout.suffix(300))")
        let plainRSA = try sClient(port, ["-tls1_2", "-cipher", "AES128-GCM-SHA256"])
        #expect(plainRSA.status != 0)
        let ecdhe = try sClient(port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256", "-alpn", "h2"])
        #expect(ecdhe.status == 0)
        #expect(ecdhe.stdout.contains("ECDHE-RSA-AES128-GCM-SHA256"))
        #expect(ecdhe.stdout.contains("ALPN protocol: h2"))
        let metrics = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
        #expect(metrics.contains("gateway_tls_handshake_failures_total 2"))
    }

    @Test func largeUploadAndDownloadOverHTTP2AreByteExact() throws {
        let pki = try TestPKI()
        let h = try Self.harness(pki, responseTimeout: "120s")
        defer { h.stop() }
        let dir = FileManager.default.temporaryDirectory
        let input = dir.appendingPathComponent("h2in-\(UUID().uuidString)").path
        let output = dir.appendingPathComponent("h2out-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: input); try? FileManager.default.removeItem(atPath: output) }
        var data = Data(count: 6 * 1024 * 1024)
        data.withUnsafeMutableBytes { p in for i in 0..<p.count { p[i] = UInt8(truncatingIfNeeded: i &* 131 &+ i >> 9) } }
        try data.write(to: URL(fileURLWithPath: input))
        let up = try Run.command("curl", ["-sS", "--fail", "--http2", "--cacert", pki.caCert, "--data-binary", "@\(input)",
                                          "-o", output, "-w", "%{http_version}", "https://127.0.0.1:\(tlsPort(h))/echo"], timeout: 60)
        #expect(up.status == 0, "\(up.stderr)")
        #expect(up.stdout == "2")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output)) == data)
        let down = try Run.command("curl", ["-sS", "--fail", "--http2", "--cacert", pki.caCert, "-o", output,
                                            "https://127.0.0.1:\(tlsPort(h))/bytes/8000000"], timeout: 60)
        #expect(down.status == 0, "\(down.stderr)")
        #expect((try? FileManager.default.attributesOfItem(atPath: output)[.size] as? Int) == 8_000_000)
    }

    @Test func manyConcurrentStreamsOnOneConnection() throws {
        let pki = try TestPKI()
        let h = try Self.harness(pki)
        defer { h.stop() }
        let r = try Run.command("h2load", ["-n", "2000", "-c", "1", "-m", "100", "https://127.0.0.1:\(tlsPort(h))/x"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("2000 succeeded, 0 failed, 0 errored"), "\(r.stdout)")
        #expect(r.stdout.contains("status codes: 2000 2xx"))
        #expect(r.stdout.contains("Application protocol: h2"))
    }

    /// A timed h2load run ends with streams in flight on every connection: the gateway must survive the
    /// abrupt closes (a stream once read its freed connection and the process aborted), keep answering, and
    /// count its connections back to zero.
    @Test func connectionsClosingWithStreamsInFlightAreHandled() throws {
        let pki = try TestPKI()
        let h = try Self.harness(pki)
        defer { h.stop() }
        for _ in 0..<2 {
            let r = try Run.command("h2load", ["-c", "32", "-m", "10", "-D", "2", "https://127.0.0.1:\(tlsPort(h))/delay/5"],
                                    timeout: 60)
            #expect(r.stdout.contains("0 errored"), "\(r.stdout)")
        }
        #expect(try curl(["--cacert", pki.caCert, "--http2", "https://127.0.0.1:\(tlsPort(h))/x"]).stdout == "200 2")
        let deadline = Date().addingTimeInterval(10)
        var open = ""
        while Date() < deadline {
            let m = try RawHTTPClient.roundTrip(port: h.adminPort, "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n").bodyText
            open = m.split(separator: "\n").first { $0.hasPrefix("gateway_connections{state=\"open\"}") }.map(String.init) ?? ""
            if open.hasSuffix(" 0") { break }
            usleep(50_000)
        }
        #expect(open.hasSuffix(" 0"), "\(open)")
    }

    @Test func httpsUpstreamIsVerifiedWithTheConfiguredCA() throws {
        let pki = try TestPKI()
        let origin = try TLSServerContext(certificatePath: pki.cert, privateKeyPath: pki.key, alpnProtocols: ["http/1.1"])
        let trusted = try GatewayHarness(upstreamTLS: origin) {
            GatewayHarness.config(upstream: $0, routes: Self.routes, upstreamExtra: "    ca_file: \(pki.caCert)")
        }
        defer { trusted.stop() }
        #expect(trusted.upstreamURL.hasPrefix("https://"))
        let c = try RawHTTPClient(port: trusted.port)
        for _ in 0..<3 {
            try c.send("GET /bytes/100000 HTTP/1.1\r\nHost: a\r\n\r\n")
            let ok = try c.readResponse()
            #expect(ok.status == 200)
            #expect(ok.body.count == 100_000)
        }
        try c.send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
        #expect(try c.readResponse().bodyText == "hello")
        #expect(trusted.upstream.requestCount == 4)
        let other = try TestPKI()
        let untrusted = try GatewayHarness(upstreamTLS: origin) {
            GatewayHarness.config(upstream: $0, routes: Self.routes, upstreamExtra: "    ca_file: \(other.caCert)")
        }
        defer { untrusted.stop() }
        let refused = try RawHTTPClient.roundTrip(port: untrusted.port, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(refused.status == 502)
        #expect(refused.bodyText.contains("tls_failed"))
        #expect(untrusted.upstream.requestCount == 0)
    }

    @Test func atsCheckPassesAgainstTheGatewaysOwnListener() throws {
        let pki = try TestPKI()
        let h = try Self.harness(pki)
        defer { h.stop() }
        let r = try Run.command(Run.gatewayBinary, ["ats-check", "127.0.0.1:\(tlsPort(h))", "--ca-file", pki.caCert], timeout: 120)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(!r.stdout.contains("FAIL"))
        #expect(r.stdout.split(separator: "\n").filter { $0.hasPrefix("PASS") }.count >= 6)
    }

    @Test func sighupReloadServesTheNewCertificate() throws {
        let pki = try TestPKI(commonName: "first")
        let h = try Self.harness(pki)
        defer { h.stop() }
        let before = try sClient(tlsPort(h), [])
        #expect(before.stdout.contains("CN = first"))
        let next = try TestPKI(commonName: "second")
        try FileManager.default.removeItem(atPath: pki.cert)
        try FileManager.default.removeItem(atPath: pki.key)
        try FileManager.default.copyItem(atPath: next.cert, toPath: pki.cert)
        try FileManager.default.copyItem(atPath: next.key, toPath: pki.key)
        let settings = try ConfigLoaderBridge.load(h.configPath)
        try h.server.reload(settings)
        var after = ""
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline && !after.contains("CN = second") { after = try sClient(tlsPort(h), []).stdout }
        #expect(after.contains("CN = second"))
    }

    // MARK: HTTP/2 abuse, with raw frames on the h2c port

    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags,
                UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)] + payload
    }

    /// A HEADERS block for `GET /` (HPACK static-table entries plus a literal :authority).
    static let getHeaders: [UInt8] = [0x82, 0x86, 0x84, 0x41, 0x01, UInt8(ascii: "a")]

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + frame(4)

    /// Frames received until the connection closes or `timeout`: (type, flags, stream, payload).
    static func readFrames(_ c: RawHTTPClient, timeout: Double = 5) -> [(UInt8, UInt8, UInt32, [UInt8])] {
        var bytes: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let chunk = c.readRaw(timeout: 0.5)
            if chunk.isEmpty { if c.peerClosed { break } else { continue } }
            bytes += chunk
            if bytes.count > 4 << 20 { break }
        }
        var frames: [(UInt8, UInt8, UInt32, [UInt8])] = []
        var i = 0
        while i + 9 <= bytes.count {
            let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            guard i + 9 + n <= bytes.count else { break }
            let stream = UInt32(bytes[i + 5] & 0x7F) << 24 | UInt32(bytes[i + 6]) << 16 | UInt32(bytes[i + 7]) << 8 | UInt32(bytes[i + 8])
            frames.append((bytes[i + 3], bytes[i + 4], stream, Array(bytes[(i + 9)..<(i + 9 + n)])))
            i += 9 + n
        }
        return frames
    }

    static func goAwayCode(_ frames: [(UInt8, UInt8, UInt32, [UInt8])]) -> UInt32? {
        guard let g = frames.last(where: { $0.0 == 7 }), g.3.count >= 8 else { return nil }
        return UInt32(g.3[4]) << 24 | UInt32(g.3[5]) << 16 | UInt32(g.3[6]) << 8 | UInt32(g.3[7])
    }

    func h2c() throws -> (GatewayHarness, RawHTTPClient) {
        let h = try GatewayHarness { GatewayHarness.config(upstream: $0, routes: Self.routes) }
        let c = try RawHTTPClient(port: h.port)
        return (h, c)
    }

    @Test func serverAdvertisesAHundredConcurrentStreams() throws {
        let (h, c) = try h2c()
        defer { h.stop() }
        try c.send(Self.preface)
        let frames = Self.readFrames(c, timeout: 1)
        let settings = try #require(frames.first { $0.0 == 4 && $0.1 & 1 == 0 })
        var found: UInt32?
        var i = 0
        while i + 6 <= settings.3.count {
            let id = UInt16(settings.3[i]) << 8 | UInt16(settings.3[i + 1])
            let v = UInt32(settings.3[i + 2]) << 24 | UInt32(settings.3[i + 3]) << 16 | UInt32(settings.3[i + 4]) << 8 | UInt32(settings.3[i + 5])
            if id == 3 { found = v }
            i += 6
        }
        #expect(found == 100)
    }

    @Test(arguments: ["ping", "settings", "rapid-reset", "continuation"])
    func floodsEndInGoAway(_ kind: String) throws {
        let (h, c) = try h2c()
        defer { h.stop() }
        var out = Self.preface
        switch kind {
        case "ping":
            for i in 0..<1000 { out += Self.frame(6, [UInt8](repeating: UInt8(i & 0xFF), count: 8)) }
        case "settings":
            for _ in 0..<1000 { out += Self.frame(4) }
        case "rapid-reset":
            for i in 0..<3000 {
                let id = UInt32(2 * i + 1)
                out += Self.frame(1, flags: 0x4 | 0x1, stream: id, Self.getHeaders)
                out += Self.frame(3, stream: id, [0, 0, 0, 8])
            }
        default:
            out += Self.frame(1, flags: 0, stream: 1, Self.getHeaders)
            for _ in 0..<200 { out += Self.frame(9, flags: 0, stream: 1, [0x40, 0x01, UInt8(ascii: "x"), 0x01, UInt8(ascii: "y")]) }
        }
        try? c.send(out)
        let frames = Self.readFrames(c)
        let code = Self.goAwayCode(frames)
        #expect(code != nil && code != 0, "\(kind): expected a GOAWAY with an error code, got frames \(frames.map(\.0))")
        #expect(h.upstream.requestCount < 600, "\(kind)")
    }

    @Test func oversizedHeaderListIsRefusedOnItsStream() throws {
        let (h, c) = try h2c()
        defer { h.stop() }
        var block = Self.getHeaders
        let value = [UInt8](repeating: UInt8(ascii: "v"), count: 20_000)
        // Literal header without indexing, new name "x-big", value length as an HPACK integer (7-bit prefix).
        block += [0x00, 0x05] + Array("x-big".utf8)
        var n = value.count - 127
        block.append(0x7F)
        while n >= 128 { block.append(UInt8(n & 0x7F | 0x80)); n >>= 7 }
        block.append(UInt8(n))
        block += value
        var out = Self.preface
        // Split over HEADERS + CONTINUATION frames of 16 KiB.
        let first = Array(block[0..<16000]), second = Array(block[16000...])
        out += Self.frame(1, flags: 0x1, stream: 1, first)
        out += Self.frame(9, flags: 0x4, stream: 1, second)
        try c.send(out)
        let frames = Self.readFrames(c, timeout: 2)
        let onStream = frames.filter { $0.2 == 1 }
        #expect(onStream.contains { $0.0 == 1 || $0.0 == 3 }, "431 HEADERS or RST_STREAM on stream 1: \(frames.map(\.0))")
        #expect(h.upstream.requestCount == 0)
    }
}
