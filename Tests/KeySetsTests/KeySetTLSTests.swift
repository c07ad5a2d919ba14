import Foundation
import Glibc
import Testing
import TestSupport
@testable import KeySets

/// A test CA, a server certificate for `IP:127.0.0.1` only, a second unrelated CA, and `openssl s_server -WWW`
/// serving `jwks.json` from the same directory over TLS.
final class TLSJWKSServer {
    let dir: String
    let process = Process()
    private(set) var port: UInt16 = 0
    var caFile: String { dir + "/ca.pem" }
    var otherCAFile: String { dir + "/other-ca.pem" }

    init(document: String) throws {
        dir = try KeySetFixtures.temporaryDirectory()
        func openssl(_ args: [String]) throws {
            let r = try Run.command("openssl", args, timeout: 60)
            try #require(r.status == 0, "openssl \(args.joined(separator: " ")) failed: \(r.stderr)")
        }
        for ca in ["ca", "other-ca"] {
            try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/\(ca).key", "-out", "\(dir)/\(ca).pem",
                         "-days", "2", "-subj", "/CN=KeySet Test \(ca)",
                         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        }
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(dir)/server.key", "-out", "\(dir)/server.csr",
                     "-subj", "/CN=127.0.0.1"])
        try "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
            .write(toFile: "\(dir)/ext.cnf", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "\(dir)/server.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key",
                     "-CAcreateserial", "-out", "\(dir)/server.pem", "-days", "2", "-extfile", "\(dir)/ext.cnf"])
        try document.write(toFile: "\(dir)/jwks.json", atomically: true, encoding: .utf8)

        let log = "\(dir)/s_server.out"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "s_server", "-accept", "0", "-cert", "\(dir)/server.pem", "-key", "\(dir)/server.key",
                             "-WWW", "-tls1_2"]
        process.currentDirectoryURL = URL(fileURLWithPath: dir)
        process.standardOutput = FileHandle(forWritingAtPath: log)
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try process.runHoldingEnvironment()
        var found: UInt16?
        _ = KeySetFixtures.waitUntil(10) {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT") }),
                  let colon = line.lastIndex(of: ":") else { return false }
            found = UInt16(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            return found != nil
        }
        port = try #require(found, "openssl s_server did not report its port")
    }

    func stop() {
        if process.isRunning {
            // SIGKILL: the test process may block SIGTERM (signal handling tests), and children inherit the mask.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// `https://` key-set fetches against a real TLS server: chain and name verification (docs/configuration.md `jwks.url`).
/// Serialized: one test points OpenSSL's default store at the test CA through `SSL_CERT_FILE`.
@Suite(.serialized) struct KeySetTLSTests {
    func fetchError(_ body: () throws -> Void) -> FetchError? {
        do { try body(); return nil } catch let error as FetchError { return error } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func verifiesChainAndHostName() throws {
        let document = try KeySetFixtures.document(["tls-kid"])
        let server = try TLSJWKSServer(document: document)
        defer { server.stop() }
        let url = "https://127.0.0.1:\(server.port)/jwks.json"

        // The right CA: accepted.
        let good = try BlockingHTTPClient(timeout: 5, caFile: server.caFile).get(url)
        #expect(String(decoding: good.body, as: UTF8.self).contains("\"tls-kid\""))

        // A CA that did not issue the certificate: refused, with OpenSSL's reason.
        let untrusted = fetchError { _ = try BlockingHTTPClient(timeout: 5, caFile: server.otherCAFile).get(url) }
        #expect(untrusted == .tlsVerify("unable to get local issuer certificate"))

        // The system store does not know the test CA.
        let system = fetchError { _ = try BlockingHTTPClient(timeout: 5).get(url) }
        #expect(system == .tlsVerify("unable to get local issuer certificate"))

        // The right CA but a name the certificate does not carry (it names IP:127.0.0.1 only).
        let wrongName = fetchError {
            _ = try BlockingHTTPClient(timeout: 5, caFile: server.caFile).get("https://localhost:\(server.port)/jwks.json")
        }
        #expect(wrongName == .tlsVerify("hostname mismatch"))

        // A missing CA file is a clear TLS setup error.
        if case .tls(let why) = fetchError({ _ = try BlockingHTTPClient(timeout: 5, caFile: server.dir + "/nope.pem").get(url) }) {
            #expect(why.contains("nope.pem"))
        } else {
            Issue.record("expected a TLS setup error")
        }

        // Plain HTTP to the TLS port fails cleanly (no hang).
        #expect(fetchError { _ = try BlockingHTTPClient(timeout: 3).get("http://127.0.0.1:\(server.port)/jwks.json") } != nil)
    }

    @Test func systemStoreAcceptsATrustedCA() throws {
        let server = try TLSJWKSServer(document: "{}")
        defer { server.stop() }
        // The environment is the process's: no other test may spawn a child while it is changed (`environmentLock`).
        environmentLock.lock()
        defer { environmentLock.unlock() }
        setenv("SSL_CERT_FILE", server.caFile, 1)
        defer { unsetenv("SSL_CERT_FILE") }
        let r = try BlockingHTTPClient(timeout: 5).get("https://127.0.0.1:\(server.port)/jwks.json")
        #expect(String(decoding: r.body, as: UTF8.self) == "{}")
    }

    @Test func providerFetchesOverHTTPS() throws {
        let server = try TLSJWKSServer(document: try KeySetFixtures.document(["tls-a", "tls-b"]))
        defer { server.stop() }
        let good = KeySetFixtures.provider(KeySetFixtures.settings(url: "https://127.0.0.1:\(server.port)/jwks.json"),
                                           caFile: server.caFile)
        defer { good.stop() }
        good.start()
        #expect(KeySetFixtures.waitUntil { good.isReady })
        #expect(good.current?.set.kids == ["tls-a", "tls-b"])

        let bad = KeySetFixtures.provider(KeySetFixtures.settings(url: "https://127.0.0.1:\(server.port)/jwks.json"),
                                          caFile: server.otherCAFile)
        defer { bad.stop() }
        bad.start()
        #expect(KeySetFixtures.waitUntil { bad.status.failedFetches >= 1 })
        #expect(!bad.isReady)
        #expect(bad.lastError?.contains("certificate verification failed") == true)
    }
}
