import COpenSSL
import Foundation

/// Offline audit of a TLS certificate chain and key against Apple App Transport Security (docs/behaviour.md): what
/// `check-config` reports for `server.tls` before a single client is turned away.
///
/// Checks: both files readable PEM; leaf (and intermediate) keys RSA ≥ 2048 or EC ≥ 256 bits; signatures
/// SHA-256 or better (no SHA-1, MD5, SHA-224) on every certificate except self-signed roots; every
/// certificate valid at `now`; the private key matches the leaf.
public enum CertificateAudit {
    /// One problem, about one file.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        public var file: String
        public var message: String
        public var description: String { "\(file): \(message)" }

        public init(file: String, message: String) {
            self.file = file
            self.message = message
        }

        /// As a `ConfigError` at the position of the configuration key that named the file.
        public func configError(file configFile: String, line: Int, column: Int) -> ConfigError {
            ConfigError(file: configFile, line: line, column: column, message: "\(self.file): \(message)")
        }
    }

    /// Every problem as `PATH: message` (empty = ATS would accept this certificate and key).
    public static func audit(certificatePath: String, privateKeyPath: String, now: Date = Date()) -> [String] {
        problems(certificatePath: certificatePath, privateKeyPath: privateKeyPath, now: now).map(\.description)
    }

    /// Every problem, structured.
    public static func problems(certificatePath: String, privateKeyPath: String, now: Date = Date()) -> [Problem] {
        ERR_clear_error()
        defer { ERR_clear_error() }
        var out: [Problem] = []
        let certs: [OpaquePointer]
        switch loadCertificates(certificatePath) {
        case .success(let c): certs = c
        case .failure(let message): out.append(Problem(file: certificatePath, message: message)); certs = []
        }
        defer { for c in certs { X509_free(c) } }
        let key: OpaquePointer?
        switch loadPrivateKey(privateKeyPath) {
        case .success(let k): key = k
        case .failure(let message): out.append(Problem(file: privateKeyPath, message: message)); key = nil
        }
        defer { if let key { EVP_PKEY_free(key) } }

        let t = time_t(now.timeIntervalSince1970.rounded(.down))
        for (index, cert) in certs.enumerated() {
            let what = describe(cert, index: index)
            let selfSigned = X509_get_extension_flags(cert) & UInt32(EXFLAG_SS) != 0
            // Key size (ATS: RSA ≥ 2048, ECC ≥ 256), on the leaf and the intermediates.
            if index == 0 || !selfSigned, let pub = X509_get0_pubkey(cert) {
                let bits = Int(EVP_PKEY_get_bits(pub))
                let type = EVP_PKEY_get_base_id(pub)
                if type == EVP_PKEY_RSA || type == EVP_PKEY_RSA_PSS {
                    if bits < 2048 { out.append(Problem(file: certificatePath,
                        message: "\(what) has a \(bits)-bit RSA key; ATS requires at least 2048 bits")) }
                } else if type == EVP_PKEY_EC {
                    if bits < 256 { out.append(Problem(file: certificatePath,
                        message: "\(what) has a \(bits)-bit EC key; ATS requires at least 256 bits")) }
                } else if index == 0 {
                    let name = OBJ_nid2sn(type).map { String(cString: $0) } ?? "unknown"
                    out.append(Problem(file: certificatePath,
                        message: "\(what) has a \(name) key; ATS accepts RSA (≥ 2048 bits) or ECDSA (≥ 256 bits)"))
                }
            }
            // Signature hash: a self-signed root's own signature is not checked by anyone.
            if !selfSigned || index == 0 {
                if let weak = weakSignatureHash(cert) {
                    out.append(Problem(file: certificatePath,
                        message: "\(what) is signed with \(weak); ATS requires SHA-256 or better"))
                }
            }
            // Validity period.
            if let notAfter = X509_get0_notAfter(cert), ASN1_TIME_cmp_time_t(notAfter, t) == -1 {
                out.append(Problem(file: certificatePath, message: "\(what) expired on \(asn1TimeText(notAfter))"))
            }
            if let notBefore = X509_get0_notBefore(cert), ASN1_TIME_cmp_time_t(notBefore, t) == 1 {
                out.append(Problem(file: certificatePath,
                    message: "\(what) is not valid before \(asn1TimeText(notBefore))"))
            }
        }
        if let leaf = certs.first, let key, X509_check_private_key(leaf, key) != 1 {
            ERR_clear_error()
            out.append(Problem(file: privateKeyPath,
                message: "the private key does not match the certificate in \(certificatePath)"))
        }
        return out
    }

    // MARK: helpers

    enum Loaded<T> { case success(T), failure(String) }

    static func loadCertificates(_ path: String) -> Loaded<[OpaquePointer]> {
        guard FileManager.default.isReadableFile(atPath: path), let bio = BIO_new_file(path, "r") else {
            ERR_clear_error()
            let reason = FileManager.default.fileExists(atPath: path) ? "permission denied" : "no such file"
            return .failure("cannot read the certificate file (\(reason))")
        }
        defer { BIO_free(bio) }
        var certs: [OpaquePointer] = []
        while let x = PEM_read_bio_X509(bio, nil, nil, nil) { certs.append(x) }
        let err = ERR_peek_last_error()
        ERR_clear_error()
        // Running out of PEM blocks ends the loop with PEM_R_NO_START_LINE; anything else is a broken block.
        if certs.isEmpty {
            return .failure("no PEM certificate found (expected -----BEGIN CERTIFICATE-----)")
        }
        if err != 0 && ERR_GET_REASON(err) != PEM_R_NO_START_LINE {
            for c in certs { X509_free(c) }
            return .failure("a PEM certificate block cannot be parsed")
        }
        return .success(certs)
    }

    static func loadPrivateKey(_ path: String) -> Loaded<OpaquePointer> {
        guard FileManager.default.isReadableFile(atPath: path), let bio = BIO_new_file(path, "r") else {
            ERR_clear_error()
            let reason = FileManager.default.fileExists(atPath: path) ? "permission denied" : "no such file"
            return .failure("cannot read the private key file (\(reason))")
        }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, COpenSSL_no_passphrase(), nil) else {
            ERR_clear_error()
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            if text.contains("ENCRYPTED") {
                return .failure("the private key is encrypted; the gateway needs an unencrypted PEM key")
            }
            return .failure("no PEM private key found (expected -----BEGIN PRIVATE KEY-----)")
        }
        return .success(key)
    }

    /// The digest name when it is weaker than SHA-256, else nil.
    package static func weakSignatureHash(_ cert: OpaquePointer) -> String? {
        var mdnid: Int32 = 0
        var pknid: Int32 = 0
        var secbits: Int32 = 0
        var flags: UInt32 = 0
        guard X509_get_signature_info(cert, &mdnid, &pknid, &secbits, &flags) == 1 else {
            ERR_clear_error()
            let nid = X509_get_signature_nid(cert)
            return OBJ_nid2ln(nid).map { "an unsupported signature algorithm (\(String(cString: $0)))" }
                ?? "an unsupported signature algorithm"
        }
        if mdnid == NID_undef && (pknid == NID_ED25519 || pknid == NID_ED448) { return nil }
        let strong: Set<Int32> = [NID_sha256, NID_sha384, NID_sha512, NID_sha512_256, NID_sha3_256, NID_sha3_384,
                                  NID_sha3_512]
        if strong.contains(mdnid) { return nil }
        let name = OBJ_nid2sn(mdnid).map { String(cString: $0).uppercased() } ?? "an unknown digest"
        return name
    }

    /// `leaf certificate (CN=…)` or `intermediate certificate 2 (CN=…)`.
    package static func describe(_ cert: OpaquePointer, index: Int) -> String {
        let role = index == 0 ? "leaf certificate" : "certificate \(index + 1) in the chain"
        guard let name = X509_get_subject_name(cert), let line = X509_NAME_oneline(name, nil, 0) else { return role }
        defer { CRYPTO_free(line, #file, #line) }
        return "\(role) (\(String(cString: line)))"
    }

    static func asn1TimeText(_ t: UnsafePointer<ASN1_TIME>) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "?" }
        defer { BIO_free(bio) }
        guard ASN1_TIME_print(bio, t) == 1 else { return "?" }
        var buf = [UInt8](repeating: 0, count: 64)
        let n = BIO_read(bio, &buf, Int32(buf.count))
        return n > 0 ? String(decoding: buf[0..<Int(n)], as: UTF8.self) : "?"
    }
}
