import Foundation

/// A throwaway certificate authority and a server certificate for 127.0.0.1/localhost, made with the
/// `openssl` CLI (RSA 2048, SHA-256), in a temporary directory.
public struct TestPKI: Sendable {
    public let directory: String
    public var caCert: String { directory + "/ca.pem" }
    public var cert: String { directory + "/cert.pem" }
    public var key: String { directory + "/key.pem" }

    /// - Parameters:
    ///   - subjectAltName: the server certificate's names (OpenSSL syntax).
    ///   - extendedKeyUsage: `serverAuth`; add `clientAuth` for a certificate a server also presents as a client
    ///     (a Redis cluster bus over TLS).
    public init(commonName: String = "127.0.0.1", subjectAltName: String = "IP:127.0.0.1,DNS:localhost",
                extendedKeyUsage: String = "serverAuth") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("pki-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let d = directory
        try "subjectAltName=\(subjectAltName)\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=\(extendedKeyUsage)\n"
            .write(toFile: d + "/ext.cnf", atomically: true, encoding: .utf8)
        try Self.openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/ca.key", "-out", d + "/ca.pem",
                          "-days", "2", "-subj", "/CN=AppCheck Gateway Test CA", "-sha256",
                          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try Self.openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", d + "/key.pem", "-out", d + "/req.csr",
                          "-subj", "/CN=\(commonName)"])
        try Self.openssl(["x509", "-req", "-in", d + "/req.csr", "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
                          "-CAcreateserial", "-out", d + "/cert.pem", "-days", "2", "-sha256", "-extfile", d + "/ext.cnf"])
    }

    static func openssl(_ args: [String]) throws {
        let r = try Run.command("openssl", args)
        guard r.status == 0 else { throw HarnessError("openssl \(args.first ?? ""): \(r.stderr)") }
    }

    /// A free TCP port on 127.0.0.1 (bound and released; fine for a child server started right after).
    public static func freePort() throws -> UInt16 {
        let (fd, port) = try boundPort()
        close(fd)
        return port
    }

    /// A TCP port on 127.0.0.1 that refuses connections for as long as `fd` stays open (bound, never listening):
    /// unlike `freePort()`, no server started meanwhile by a test running in parallel can take it. Close `fd` after.
    public static func refusingPort() throws -> (fd: Int32, port: UInt16) {
        try boundPort()
    }

    private static func boundPort() throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else {
            close(fd)
            throw HarnessError("no free port")
        }
        return (fd, UInt16(bigEndian: addr.sin_port))
    }
}
