import EventLoop
import Foundation
import Glibc
import Testing
@testable import TestSupport

/// `openssl s_client` against 127.0.0.1:`port`, stdin closed right away (handshake, print, quit).
private func sClient(_ port: UInt16, _ args: [String], ca: String? = nil) throws -> ProcessResult {
    var a = ["s_client", "-connect", "127.0.0.1:\(port)"] + args
    if let ca { a += ["-CAfile", ca, "-verify_return_error", "-verify_ip", "127.0.0.1"] }
    return try Run.command("openssl", a, timeout: 30)
}

private func serverContext(_ f: TLSFixtures, min: TLSMinimumVersion = .tls12,
                           alpn: [String] = TLSServerContext.defaultALPN) throws -> TLSServerContext {
    try TLSServerContext(certificatePath: f.serverCert, privateKeyPath: f.serverKey, minimumVersion: min,
                         alpnProtocols: alpn)
}

@Suite(.serialized) struct TLSStreamTests {
    init() { signal(SIGPIPE, SIG_IGN) }

    @Test func serverContextLoadsGoodFilesAndExplainsBadOnes() throws {
        let f = try TLSFixtures.shared()
        _ = try serverContext(f)
        _ = try TLSServerContext(certificatePath: f.ecCert, privateKeyPath: f.ecKey)
        #expect(throws: TLSError.self) { try TLSServerContext(certificatePath: f.serverCert, privateKeyPath: f.strayKey) }
        do {
            _ = try TLSServerContext(certificatePath: f.serverCert, privateKeyPath: f.strayKey)
        } catch {
            #expect(error.message.contains("does not match"), "\(error)")
            #expect(error.message.contains(f.strayKey))
        }
        do {
            _ = try TLSServerContext(certificatePath: f.serverCert, privateKeyPath: f.ecKey)
            Issue.record("an EC key was accepted for an RSA certificate")
        } catch {
            #expect(error.message.contains("does not match"), "\(error)")
        }
        do {
            _ = try TLSServerContext(certificatePath: f.dir + "/missing.pem", privateKeyPath: f.serverKey)
            Issue.record("a missing certificate file was accepted")
        } catch {
            #expect(error.message.contains("missing.pem"), "\(error)")
        }
        do {
            _ = try TLSServerContext(certificatePath: f.serverCert, privateKeyPath: f.encryptedKey)
            Issue.record("an encrypted key was accepted without a passphrase")
        } catch {
            #expect(error.message.contains("encrypted.key"), "\(error)")
        }
        #expect(TLSServerContext.tls12CipherList.split(separator: ":").allSatisfy { $0.hasPrefix("ECDHE-") })
    }

    @Test func opensslClientGetsH2OverTLS13WithAVerifiedChain() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try serverContext(f))
        defer { server.stop() }
        let r = try sClient(server.port, ["-alpn", "h2"], ca: f.caCert)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("ALPN protocol: h2"), "\(r.stdout)")
        #expect(r.stdout.contains("TLSv1.3"))
        #expect(r.stdout.contains("Verify return code: 0 (ok)"))
        let hs = server.stats.withLock { $0.handshakes }
        #expect(hs.first?.alpn == "h2")
        #expect(hs.first?.version == "TLSv1.3")
    }

    @Test func alpnPrefersH2ThenHTTP1AndFallsBackToNone() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try serverContext(f))
        defer { server.stop() }
        // Client order does not matter: the server's preference wins.
        let both = try sClient(server.port, ["-alpn", "http/1.1,h2"])
        #expect(both.stdout.contains("ALPN protocol: h2"), "\(both.stdout)")
        let h1 = try sClient(server.port, ["-alpn", "http/1.1"])
        #expect(h1.stdout.contains("ALPN protocol: http/1.1"), "\(h1.stdout)")
        let other = try sClient(server.port, ["-alpn", "spdy/3,imap"])
        #expect(other.status == 0, "\(other.stderr)")
        #expect(other.stdout.contains("No ALPN negotiated"), "\(other.stdout)")
        let none = try sClient(server.port, [])
        #expect(none.stdout.contains("No ALPN negotiated"))
        let alpns = server.stats.withLock { $0.handshakes.map(\.alpn) }
        #expect(alpns == ["h2", "http/1.1", nil, nil])

        // An HTTP/1-only listener, swapped in like a reload: new connections use the new context.
        server.swapContext(try serverContext(f, alpn: ["http/1.1"]))
        let reloaded = try sClient(server.port, ["-alpn", "h2,http/1.1"])
        #expect(reloaded.stdout.contains("ALPN protocol: http/1.1"), "\(reloaded.stdout)")
    }

    @Test func tls12UsesServerPreferenceAmongECDHEAEADSuites() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try serverContext(f))
        defer { server.stop() }
        let r = try sClient(server.port, ["-tls1_2"])
        #expect(r.stdout.contains("Cipher is ECDHE-RSA-AES128-GCM-SHA256"), "\(r.stdout)")
        #expect(r.stdout.contains("TLSv1.2"))
        // The client lists CHACHA20 first; the server's order puts AES-256-GCM before it.
        let pref = try sClient(server.port, ["-tls1_2", "-cipher", "ECDHE-RSA-CHACHA20-POLY1305:ECDHE-RSA-AES256-GCM-SHA384"])
        #expect(pref.stdout.contains("Cipher is ECDHE-RSA-AES256-GCM-SHA384"), "\(pref.stdout)")
        // No compression, secure renegotiation flag aside.
        #expect(r.stdout.contains("Compression: NONE"))
    }

    @Test func legacyVersionsAndNonForwardSecretSuitesAreRefused() throws {
        let f = try TLSFixtures.shared()
        // Control: this client really offers TLS 1.1 and 1.0, and a plain-RSA-key-exchange suite.
        let legacy = try OpenSSLServer(cert: f.serverCert, key: f.serverKey,
                                       extra: ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        defer { legacy.stop() }
        let control = try sClient(legacy.port, ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        #expect(control.status == 0, "control s_client -tls1_1 failed: \(control.stderr)")
        #expect(control.stdout.contains("TLSv1.1"), "\(control.stdout)")
        legacy.stop()
        let plainRSA = try OpenSSLServer(cert: f.serverCert, key: f.serverKey,
                                         extra: ["-tls1_2", "-cipher", "AES128-GCM-SHA256"])
        defer { plainRSA.stop() }
        let control2 = try sClient(plainRSA.port, ["-tls1_2", "-cipher", "AES128-GCM-SHA256"])
        #expect(control2.status == 0, "control s_client AES128-GCM-SHA256 failed: \(control2.stderr)")
        #expect(control2.stdout.contains("Cipher is AES128-GCM-SHA256"))
        plainRSA.stop()

        let server = try TLSEchoServer(context: try serverContext(f))
        defer { server.stop() }
        let v11 = try sClient(server.port, ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        #expect(v11.status != 0, "TLS 1.1 was accepted: \(v11.stdout)")
        let v10 = try sClient(server.port, ["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        #expect(v10.status != 0, "TLS 1.0 was accepted: \(v10.stdout)")
        let rsaKx = try sClient(server.port, ["-tls1_2", "-cipher", "AES128-GCM-SHA256"])
        #expect(rsaKx.status != 0, "a non-ECDHE suite was accepted: \(rsaKx.stdout)")
        let cbc = try sClient(server.port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA"])
        #expect(cbc.status != 0, "a non-AEAD suite was accepted: \(cbc.stdout)")
        #expect(server.stats.withLock { $0.handshakes.isEmpty })
        #expect(server.stats.withLock { $0.failures.count } == 4)
    }

    @Test func minimumVersion13RefusesTLS12() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try serverContext(f, min: .tls13))
        defer { server.stop() }
        #expect(try sClient(server.port, ["-tls1_2"]).status != 0)
        let ok = try sClient(server.port, ["-tls1_3"])
        #expect(ok.status == 0)
        #expect(ok.stdout.contains("TLSv1.3"))
    }

    @Test func tls12SessionsResume() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try serverContext(f))
        defer { server.stop() }
        let sess = f.dir + "/session-\(server.port).pem"
        let first = try sClient(server.port, ["-tls1_2", "-sess_out", sess])
        #expect(first.stdout.contains("New, TLSv1.2"), "\(first.stdout)")
        let second = try sClient(server.port, ["-tls1_2", "-sess_in", sess])
        #expect(second.stdout.contains("Reused, TLSv1.2"), "\(second.stdout)")
    }

    @Test func curlGetsAnHTTP1ResponseFromAnHTTP1OnlyListener() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try serverContext(f, alpn: ["http/1.1"]))
        defer { server.stop() }
        let r = try Run.command("curl", ["-sS", "-v", "--max-time", "20", "--cacert", f.caCert,
                                         "https://127.0.0.1:\(server.port)/"], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "hello over TLSv1.3 alpn=http/1.1\n", "\(r.stdout)")
        #expect(r.stderr.contains("ALPN: server accepted http/1.1") || r.stderr.contains("ALPN, server accepted to use http/1.1"),
                "\(r.stderr)")
        let byName = try Run.command("curl", ["-sS", "--max-time", "20", "--cacert", f.caCert, "--tls-max", "1.2",
                                              "--resolve", "localhost:\(server.port):127.0.0.1",
                                              "https://localhost:\(server.port)/"], timeout: 30)
        #expect(byName.status == 0, "\(byName.stderr)")
        #expect(byName.stdout == "hello over TLSv1.2 alpn=http/1.1\n", "\(byName.stdout)")
    }

    @Test func fiveMebibytesEchoByteExactBothWays() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try serverContext(f))
        defer { server.stop() }
        let client = try TLSClientContext(caFile: f.caCert)
        let fd = try tlsTestConnect(port: server.port)
        defer { Socket.close(fd) }
        let stream = try client.makeStream(fd: fd, serverName: "127.0.0.1")
        #expect(tlsTestHandshake(stream) == .done)
        #expect(stream.negotiatedALPN == "http/1.1")
        #expect(stream.protocolVersion == "TLSv1.3")
        #expect(stream.cipher.hasPrefix("TLS_"))

        let total = 5 * 1024 * 1024
        var payload = [UInt8](repeating: 0, count: total)
        var x: UInt32 = 0x1234_5678
        for i in 0..<total { x = x &* 1_664_525 &+ 1_013_904_223; payload[i] = UInt8(truncatingIfNeeded: x >> 24) }
        let out = IOBuffer(capacity: 256 * 1024)
        let received = IOBuffer(capacity: total + 65536)
        var sent = 0
        let deadline = Date().addingTimeInterval(60)
        var failure: String?
        loop: while received.readableCount < total {
            guard Date() < deadline else {
                failure = "timed out with \(received.readableCount) bytes back; sent \(sent), client out \(out.readableCount), "
                    + "client pending \(stream.pendingBytes) rww \(stream.readWantsWrite) wwr \(stream.writeWantsRead); "
                    + "server \(server.debugState())"
                break
            }
            if out.isEmpty && sent < total {
                let n = min(200_000, total - sent)  // odd-sized chunks, not record-aligned
                payload.withUnsafeBytes { out.append(UnsafeRawBufferPointer(rebasing: $0[sent..<(sent + n)])) }
                sent += n
            }
            if !out.isEmpty, case .error(let e) = stream.write(from: out) {
                failure = "write error \(e): \(stream.lastError ?? "")"; break
            }
            reading: while true {
                switch stream.read(into: received, max: 65536) {
                case .processed(let n): if n < 65536 { break reading }
                case .wouldBlock: break reading
                case .eof: failure = "unexpected EOF"; break loop
                case .error(let e): failure = "read error \(e): \(stream.lastError ?? "")"; break loop
                }
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN) | (out.isEmpty ? 0 : Int16(POLLOUT)), revents: 0)
            _ = poll(&p, 1, 100)
        }
        #expect(failure == nil, "\(failure ?? "")")
        #expect(received.readableCount == total)
        #expect(received.readableCount == total && received.readable.elementsEqual(payload), "echoed bytes differ")
        stream.shutdown()
        // The server's 4 KiB reads of 16 KiB records leave decrypted bytes inside OpenSSL (SSL_pending) that
        // no epoll edge announces; the echo completing proves they were drained.
        #expect(server.stats.withLock { $0.maxPendingSeen } > 0)
        #expect(server.stats.withLock { $0.failures }.isEmpty)
    }

    @Test func clientContextVerifiesChainAndHostName() throws {
        let f = try TLSFixtures.shared()
        let s = try OpenSSLServer(cert: f.serverCert, key: f.serverKey, extra: ["-alpn", "http/1.1"])
        defer { s.stop() }
        func attempt(_ ctx: TLSClientContext, _ name: String) throws -> TLSHandshakeResult {
            let fd = try tlsTestConnect(port: s.port)
            defer { Socket.close(fd) }
            let stream = try ctx.makeStream(fd: fd, serverName: name)
            let r = tlsTestHandshake(stream)
            if r == .done {
                #expect(stream.negotiatedALPN == "http/1.1")
                stream.shutdown()
            }
            return r
        }
        let trusted = try TLSClientContext(caFile: f.caCert)
        #expect(try attempt(trusted, "localhost") == .done)
        #expect(try attempt(trusted, "127.0.0.1") == .done)
        guard case .failed(let wrongName) = try attempt(trusted, "wrong.example") else {
            Issue.record("a wrong host name was accepted"); return
        }
        #expect(wrongName.contains("hostname mismatch"), "\(wrongName)")
        guard case .failed(let wrongIP) = try attempt(trusted, "127.0.0.2") else {
            Issue.record("a wrong IP address was accepted"); return
        }
        #expect(wrongIP.contains("IP address mismatch"), "\(wrongIP)")
        let untrusted = try TLSClientContext(caFile: f.otherCACert)
        guard case .failed(let badCA) = try attempt(untrusted, "localhost") else {
            Issue.record("an untrusted chain was accepted"); return
        }
        #expect(badCA.contains("certificate verify failed"), "\(badCA)")
        let system = try TLSClientContext()
        guard case .failed = try attempt(system, "localhost") else {
            Issue.record("the system store trusted the test CA"); return
        }
        #expect(throws: TLSError.self) { try TLSClientContext(caFile: f.dir + "/missing-ca.pem") }
    }
}
