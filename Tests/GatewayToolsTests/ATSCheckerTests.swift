import EventLoop
import Foundation
import Gateway
import GatewayTools
import Glibc
import Testing
@testable import TestSupport

@Suite(.serialized) struct ATSCheckerTests {
    init() { signal(SIGPIPE, SIG_IGN) }

    private func check(_ port: UInt16, ca: String?, serverName: String? = nil) throws -> [ATSCheckLine] {
        try ATSChecker.run(ATSCheckOptions(host: "127.0.0.1", port: port, serverName: serverName, caFile: ca, timeout: 5))
    }

    private func line(_ lines: [ATSCheckLine], _ requirement: String) -> ATSCheckLine? {
        lines.first { $0.requirement == requirement }
    }

    @Test func targetsParse() {
        #expect(ATSCheckOptions.parseTarget("example.com:8443")! == ("example.com", 8443))
        #expect(ATSCheckOptions.parseTarget("example.com")! == ("example.com", 443))
        #expect(ATSCheckOptions.parseTarget("[::1]:8443")! == ("::1", 8443))
        #expect(ATSCheckOptions.parseTarget("::1")! == ("::1", 443))
        #expect(ATSCheckOptions.parseTarget("host:0") == nil)
        #expect(ATSCheckOptions.parseTarget("host:x") == nil)
        #expect(ATSCheckOptions.parseTarget(":443") == nil)
    }

    @Test func gatewayTLSContextPassesEveryRequirement() throws {
        let f = try TLSFixtures.shared()
        let server = try TLSEchoServer(context: try TLSServerContext(certificatePath: f.serverCert, privateKeyPath: f.serverKey))
        defer { server.stop() }
        let lines = try check(server.port, ca: f.caCert)
        #expect(lines.count == 7)
        let report = lines.map { $0.description }.joined(separator: "\n")
        #expect(lines.allSatisfy { $0.passed }, "\(report)")
        #expect(line(lines, ATSChecker.requirementProtocol)?.detail.contains("TLS 1.3") == true)
        #expect(line(lines, ATSChecker.requirementForwardSecrecy)?.detail.contains("ECDHE-RSA-AES128-GCM-SHA256") == true)
        #expect(line(lines, ATSChecker.requirementForwardSecrecy)?.detail.contains("3 accepted") == true,
                "\(line(lines, ATSChecker.requirementForwardSecrecy)?.detail ?? "")")
        #expect(line(lines, ATSChecker.requirementKeySize)?.detail == "RSA 2048 bits")

        // Same server, judged by what a stranger trusts / for another name: the chain line fails alone.
        let wrongName = try check(server.port, ca: f.caCert, serverName: "other.example")
        #expect(wrongName.filter { !$0.passed }.map(\.requirement) == [ATSChecker.requirementChain])
        #expect(line(wrongName, ATSChecker.requirementChain)?.detail.contains("hostname mismatch") == true)
        let untrusted = try check(server.port, ca: f.otherCACert)
        #expect(untrusted.filter { !$0.passed }.map(\.requirement) == [ATSChecker.requirementChain])
    }

    @Test func weakCertificatesFailKeySizeAndSignature() throws {
        let f = try TLSFixtures.shared()
        let rsa = try OpenSSLServer(cert: f.rsa1024Cert, key: f.rsa1024Key,
                                    extra: ["-cipher", "ECDHE+AESGCM:@SECLEVEL=0", "-alpn", "h2"])
        defer { rsa.stop() }
        let small = try check(rsa.port, ca: f.caCert)
        #expect(line(small, ATSChecker.requirementKeySize)?.passed == false)
        #expect(line(small, ATSChecker.requirementKeySize)?.detail.contains("RSA 1024 bits") == true)
        #expect(line(small, ATSChecker.requirementALPN)?.passed == true)
        rsa.stop()
        let sha1 = try OpenSSLServer(cert: f.sha1Cert, key: f.sha1Key,
                                     extra: ["-cipher", "ECDHE+AESGCM:@SECLEVEL=0", "-alpn", "h2"])
        defer { sha1.stop() }
        let weak = try check(sha1.port, ca: f.caCert)
        #expect(line(weak, ATSChecker.requirementSignature)?.passed == false)
        #expect(line(weak, ATSChecker.requirementSignature)?.detail.contains("SHA1") == true)
        #expect(line(weak, ATSChecker.requirementKeySize)?.passed == true)
    }

    @Test func legacyProtocolServerFails() throws {
        let f = try TLSFixtures.shared()
        let s = try OpenSSLServer(cert: f.serverCert, key: f.serverKey, extra: ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        defer { s.stop() }
        let lines = try check(s.port, ca: f.caCert)
        #expect(line(lines, ATSChecker.requirementLegacy)?.passed == false)
        #expect(line(lines, ATSChecker.requirementLegacy)?.detail.contains("TLS 1.1") == true)
        #expect(line(lines, ATSChecker.requirementProtocol)?.passed == false)
    }

    @Test func nonForwardSecretSuiteFails() throws {
        let f = try TLSFixtures.shared()
        let s = try OpenSSLServer(cert: f.serverCert, key: f.serverKey,
                                  extra: ["-tls1_2", "-cipher", "AES128-GCM-SHA256", "-alpn", "h2,http/1.1"])
        defer { s.stop() }
        let lines = try check(s.port, ca: f.caCert)
        let fs = line(lines, ATSChecker.requirementForwardSecrecy)
        #expect(fs?.passed == false)
        #expect(fs?.detail == "accepted without forward secrecy: AES128-GCM-SHA256", "\(fs?.detail ?? "")")
        #expect(line(lines, ATSChecker.requirementProtocol)?.passed == true)
        #expect(line(lines, ATSChecker.requirementLegacy)?.passed == true)
        #expect(line(lines, ATSChecker.requirementChain)?.passed == true)
        #expect(line(lines, ATSChecker.requirementALPN)?.passed == true)
    }

    @Test func commandLineExitCodes() throws {
        let f = try TLSFixtures.shared()
        let binary = Run.gatewayBinary
        #expect(FileManager.default.isExecutableFile(atPath: binary), "no binary at \(binary)")

        let server = try TLSEchoServer(context: try TLSServerContext(certificatePath: f.serverCert, privateKeyPath: f.serverKey))
        defer { server.stop() }
        let pass = try Run.command(binary, ["ats-check", "127.0.0.1:\(server.port)", "--ca-file", f.caCert, "--timeout", "5"])
        #expect(pass.status == 0, "\(pass.stdout)\(pass.stderr)")
        let passLines = pass.stdout.split(separator: "\n")
        #expect(passLines.count == 7 && passLines.allSatisfy { $0.hasPrefix("PASS ") }, "\(pass.stdout)")
        // By name, with the name checked against the certificate's DNS entry.
        let byName = try Run.command(binary, ["ats-check", "127.0.0.1:\(server.port)", "--servername", "localhost",
                                              "--ca-file", f.caCert])
        #expect(byName.status == 0, "\(byName.stdout)")
        // The system store does not know the test CA.
        let system = try Run.command(binary, ["ats-check", "127.0.0.1:\(server.port)"])
        #expect(system.status == 1)
        #expect(system.stdout.contains("FAIL chain valid for host name:"), "\(system.stdout)")

        let legacy = try OpenSSLServer(cert: f.serverCert, key: f.serverKey, extra: ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"])
        defer { legacy.stop() }
        let fail = try Run.command(binary, ["ats-check", "127.0.0.1:\(legacy.port)", "--ca-file", f.caCert])
        #expect(fail.status == 1)
        #expect(fail.stdout.contains("FAIL TLS 1.0 and 1.1 refused: accepted TLS 1.1"), "\(fail.stdout)")
        legacy.stop()

        // Nothing listening: one clear line on stderr, exit 1.
        let closedPort = try tlsTestFreePort()
        let down = try Run.command(binary, ["ats-check", "127.0.0.1:\(closedPort)", "--timeout", "2"])
        #expect(down.status == 1)
        #expect(down.stdout.isEmpty)
        #expect(down.stderr == "appcheck-gateway: ats-check: cannot connect to 127.0.0.1:\(closedPort): Connection refused\n",
                "\(down.stderr)")
        let bad = try Run.command(binary, ["ats-check", "no-port:"])
        #expect(bad.status != 0)
    }
}
