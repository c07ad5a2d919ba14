import Foundation
import Gateway
@testable import GatewayConfig
@testable import TestSupport
import Testing

@Suite struct CertificateAuditTests {
    private func audit(_ cert: String, _ key: String, now: Date = Date()) -> [String] {
        CertificateAudit.audit(certificatePath: cert, privateKeyPath: key, now: now)
    }

    @Test func goodRSAAndECCertificatesPass() throws {
        let f = try TLSFixtures.shared()
        #expect(audit(f.serverCert, f.serverKey) == [])
        #expect(audit(f.ecCert, f.ecKey) == [])
    }

    @Test func smallKeysAreReported() throws {
        let f = try TLSFixtures.shared()
        let rsa = audit(f.rsa1024Cert, f.rsa1024Key)
        #expect(rsa.count == 1)
        #expect(rsa.first?.hasPrefix(f.rsa1024Cert + ": leaf certificate") == true, "\(rsa)")
        #expect(rsa.first?.contains("1024-bit RSA key; ATS requires at least 2048 bits") == true, "\(rsa)")
        let ec = audit(f.ec224Cert, f.ec224Key)
        #expect(ec.count == 1)
        #expect(ec.first?.contains("224-bit EC key; ATS requires at least 256 bits") == true, "\(ec)")
    }

    @Test func sha1SignaturesAreReportedOnLeafAndIntermediates() throws {
        let f = try TLSFixtures.shared()
        let leaf = audit(f.sha1Cert, f.sha1Key)
        #expect(leaf.count == 1)
        #expect(leaf.first?.contains("is signed with SHA1; ATS requires SHA-256 or better") == true, "\(leaf)")

        // A chain file: SHA-256 leaf, then an intermediate that the root signed with SHA-1.
        let dir = f.dir + "/chain-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func ossl(_ args: [String]) throws {
            let r = try Run.command("openssl", args)
            #expect(r.status == 0, "openssl \(args): \(r.stderr)")
        }
        try "basicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign,cRLSign\n"
            .write(toFile: dir + "/ca.ext", atomically: true, encoding: .utf8)
        try "subjectAltName=DNS:localhost\n".write(toFile: dir + "/leaf.ext", atomically: true, encoding: .utf8)
        try ossl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/int.key", "-out", dir + "/int.csr",
                  "-subj", "/CN=SHA1 Intermediate"])
        try ossl(["x509", "-req", "-in", dir + "/int.csr", "-CA", f.caCert, "-CAkey", f.caKey, "-set_serial", "7",
                  "-days", "30", "-sha1", "-extfile", dir + "/ca.ext", "-out", dir + "/int.pem"])
        try ossl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/leaf.key", "-out", dir + "/leaf.csr",
                  "-subj", "/CN=localhost"])
        try ossl(["x509", "-req", "-in", dir + "/leaf.csr", "-CA", dir + "/int.pem", "-CAkey", dir + "/int.key",
                  "-set_serial", "8", "-days", "30", "-sha256", "-extfile", dir + "/leaf.ext", "-out", dir + "/leaf.pem"])
        let chain = try String(contentsOfFile: dir + "/leaf.pem", encoding: .utf8)
            + String(contentsOfFile: dir + "/int.pem", encoding: .utf8)
            + String(contentsOfFile: f.caCert, encoding: .utf8)  // a root in the file: its own signature is ignored
        try chain.write(toFile: dir + "/fullchain.pem", atomically: true, encoding: .utf8)
        let problems = audit(dir + "/fullchain.pem", dir + "/leaf.key")
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.contains("certificate 2 in the chain") == true, "\(problems)")
        #expect(problems.first?.contains("SHA1 Intermediate") == true)
        #expect(problems.first?.contains("SHA1") == true)
    }

    @Test func validityWindowIsChecked() throws {
        let f = try TLSFixtures.shared()
        let expired = audit(f.expiredCert, f.expiredKey)
        #expect(expired.count == 1)
        #expect(expired.first?.contains("expired on Mar  1 00:00:00 2020 GMT") == true, "\(expired)")
        let future = audit(f.futureCert, f.futureKey)
        #expect(future.count == 1)
        #expect(future.first?.contains("is not valid before Jan  1 00:00:00 2045 GMT") == true, "\(future)")
        // The clock is a parameter: the good certificate (30 days) is expired a year from now.
        let later = audit(f.serverCert, f.serverKey, now: Date().addingTimeInterval(365 * 86400))
        #expect(later.count == 1)
        #expect(later.first?.contains("expired") == true)
        #expect(audit(f.futureCert, f.futureKey, now: Date(timeIntervalSince1970: 2_380_000_000)) == [])
    }

    @Test func keyMismatchAndUnreadableFilesAreReported() throws {
        let f = try TLSFixtures.shared()
        let mismatch = CertificateAudit.problems(certificatePath: f.serverCert, privateKeyPath: f.strayKey, now: Date())
        #expect(mismatch == [CertificateAudit.Problem(file: f.strayKey,
            message: "the private key does not match the certificate in \(f.serverCert)")])
        let mixed = audit(f.serverCert, f.ecKey)
        #expect(mixed.count == 1 && mixed.first?.contains("does not match") == true, "\(mixed)")

        let missing = audit(f.dir + "/nope.pem", f.dir + "/nope.key")
        #expect(missing == [f.dir + "/nope.pem: cannot read the certificate file (no such file)",
                            f.dir + "/nope.key: cannot read the private key file (no such file)"])
        let notPEM = audit(f.notPEM, f.serverKey)
        #expect(notPEM == [f.notPEM + ": no PEM certificate found (expected -----BEGIN CERTIFICATE-----)"])
        let keyNotPEM = audit(f.serverCert, f.notPEM)
        #expect(keyNotPEM == [f.notPEM + ": no PEM private key found (expected -----BEGIN PRIVATE KEY-----)"])
        let encrypted = audit(f.serverCert, f.encryptedKey)
        #expect(encrypted.count == 1 && encrypted.first?.contains("encrypted") == true, "\(encrypted)")
        // A key file given as the certificate is not a certificate.
        #expect(audit(f.serverKey, f.serverKey).first?.contains("no PEM certificate found") == true)

        let asConfigError = mismatch[0].configError(file: "gateway.yaml", line: 7, column: 18)
        #expect(asConfigError.description == "gateway.yaml:7:18: \(f.strayKey): the private key does not match the certificate in \(f.serverCert)")
    }

    @Test func severalProblemsAreAllReported() throws {
        let f = try TLSFixtures.shared()
        // 1024-bit leaf, with a stray key, judged in 2046: three problems.
        let all = audit(f.rsa1024Cert, f.strayKey, now: Date(timeIntervalSince1970: 2_400_000_000))
        #expect(all.count == 3, "\(all)")
    }
}
