import AppAttest
import COpenSSL
import Synchronization

/// A stand-in for Apple's App Attest PKI, made fresh in memory: a self-signed P-384 root, a P-384
/// intermediate under it (both valid from `now - 1 day` for 20 years), and P-256 leaf certificates carrying
/// the nonce extension `1.2.840.113635.100.8.2`, as Apple's are. A gateway configured with `rootPEM` as
/// `root_ca_file` accepts the simulator's attestations. Development and tests only.
public final class SimulatedAppAttestCA: @unchecked Sendable {
    private let rootKey: SimulatorKey
    private let intermediateKey: SimulatorKey
    private let root: OpaquePointer
    private let intermediate: OpaquePointer
    private let lastSerial = Mutex<Int>(2)

    /// The root certificate in PEM, for `AppAttestVerifier(rootCertificatePEM:)` or `root_ca_file`.
    public let rootPEM: String
    /// The root certificate in DER.
    public let rootDER: [UInt8]
    /// The intermediate certificate in DER (`x5c[1]`).
    public let intermediateDER: [UInt8]

    /// Makes a root and an intermediate valid from `now - 86400` (seconds since the Unix epoch) for 20 years.
    public init(now: Int64) throws(SimulatorError) {
        rootKey = try SimulatorKey(curve: "P-384")
        intermediateKey = try SimulatorKey(curve: "P-384")
        let notBefore = now - 86_400, notAfter = now + 20 * 365 * 86_400
        root = try Self.certificate(commonName: "Simulated App Attestation Root CA", serial: 1, subjectKey: rootKey, issuer: nil,
                                    issuerKey: rootKey, notBefore: notBefore, notAfter: notAfter, isCA: true, extensions: [])
        intermediate = try Self.certificate(commonName: "Simulated App Attestation CA 1", serial: 2, subjectKey: intermediateKey,
                                            issuer: root, issuerKey: rootKey, notBefore: notBefore, notAfter: notAfter, isCA: true, extensions: [])
        rootDER = try Self.der(root)
        intermediateDER = try Self.der(intermediate)
        rootPEM = Self.pem(rootDER)
    }

    deinit {
        X509_free(root)
        X509_free(intermediate)
    }

    /// A leaf (`x5c[0]`) for the P-256 key `spki` (SubjectPublicKeyInfo DER) certifying `nonce`, signed by
    /// the intermediate with ECDSA-SHA256. `nonceExtension` replaces the extension's exact DER value
    /// (`30 24 A1 22 04 20 ‖ nonce`) and `nil` there with `omitNonce` leaves the extension out (for tests).
    public func issueLeaf(spki: [UInt8], nonce: [UInt8], notBefore: Int64, notAfter: Int64,
                          nonceExtension: [UInt8]? = nil, omitNonce: Bool = false) throws(SimulatorError) -> [UInt8] {
        let key: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let key else { ERR_clear_error(); throw SimulatorError("d2i_PUBKEY") }
        defer { EVP_PKEY_free(key) }
        let value = nonceExtension ?? ([0x30, 0x24, 0xA1, 0x22, 0x04, 0x20] + nonce)
        let serial = lastSerial.withLock { value -> Int in value += 1; return value }
        let leaf = try Self.certificate(commonName: "simulated-device", serial: serial, subjectPublicKey: key, issuer: intermediate,
                                        issuerKey: intermediateKey, notBefore: notBefore, notAfter: notAfter, isCA: false,
                                        extensions: omitNonce ? [] : [("1.2.840.113635.100.8.2", value)])
        defer { X509_free(leaf) }
        return try Self.der(leaf)
    }

    // MARK: - OpenSSL

    static func certificate(commonName: String, serial: Int, subjectKey: SimulatorKey, issuer: OpaquePointer?,
                                    issuerKey: SimulatorKey, notBefore: Int64, notAfter: Int64, isCA: Bool,
                                    extensions: [(String, [UInt8])]) throws(SimulatorError) -> OpaquePointer {
        try certificate(commonName: commonName, serial: serial, subjectPublicKey: subjectKey.pointer, issuer: issuer,
                        issuerKey: issuerKey, notBefore: notBefore, notAfter: notAfter, isCA: isCA, extensions: extensions)
    }

    static func certificate(commonName: String, serial: Int, subjectPublicKey: OpaquePointer, issuer: OpaquePointer?,
                                    issuerKey: SimulatorKey, notBefore: Int64, notAfter: Int64, isCA: Bool,
                                    extensions: [(String, [UInt8])]) throws(SimulatorError) -> OpaquePointer {
        guard let x509 = X509_new() else { throw SimulatorError("X509_new") }
        var ok = false
        defer { if !ok { X509_free(x509) } }
        guard let name = X509_NAME_new() else { throw SimulatorError("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        guard X509_set_version(x509, 2) == 1,
              ASN1_INTEGER_set(X509_get_serialNumber(x509), serial) == 1,
              ASN1_TIME_set(X509_getm_notBefore(x509), time_t(notBefore)) != nil,
              ASN1_TIME_set(X509_getm_notAfter(x509), time_t(notAfter)) != nil,
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
              X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, "AppCheck Gateway simulator", -1, -1, 0) == 1,
              X509_set_subject_name(x509, name) == 1,
              X509_set_issuer_name(x509, issuer.map { X509_get_subject_name($0) } ?? name) == 1,
              X509_set_pubkey(x509, subjectPublicKey) == 1 else {
            ERR_clear_error()
            throw SimulatorError("X509 fields")
        }
        let standard = isCA ? [(NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign")]
                            : [(NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature")]
        for (nid, value) in standard {
            guard let ext = X509V3_EXT_nconf_nid(nil, nil, nid, value) else { ERR_clear_error(); throw SimulatorError("X509V3_EXT_nconf_nid") }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { ERR_clear_error(); throw SimulatorError("X509_add_ext") }
        }
        for (oid, value) in extensions {
            guard let object = OBJ_txt2obj(oid, 1) else { ERR_clear_error(); throw SimulatorError("OBJ_txt2obj") }
            defer { ASN1_OBJECT_free(object) }
            guard let octets = ASN1_OCTET_STRING_new() else { throw SimulatorError("ASN1_OCTET_STRING_new") }
            defer { ASN1_OCTET_STRING_free(octets) }
            guard ASN1_OCTET_STRING_set(octets, value, Int32(value.count)) == 1,
                  let ext = X509_EXTENSION_create_by_OBJ(nil, object, 0, octets) else {
                ERR_clear_error()
                throw SimulatorError("X509_EXTENSION_create_by_OBJ")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { ERR_clear_error(); throw SimulatorError("X509_add_ext") }
        }
        let digest = isCA ? EVP_sha384() : EVP_sha256()
        guard X509_sign(x509, issuerKey.pointer, digest) > 0 else { ERR_clear_error(); throw SimulatorError("X509_sign") }
        ok = true
        return x509
    }

    static func der(_ x509: OpaquePointer) throws(SimulatorError) -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509(x509, &out)
        guard length > 0, let out else { ERR_clear_error(); throw SimulatorError("i2d_X509") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    static func pem(_ der: [UInt8]) -> String {
        let base64 = base64Encode(der)
        var lines: [String] = ["-----BEGIN CERTIFICATE-----"]
        var index = base64.startIndex
        while index < base64.endIndex {
            let end = base64.index(index, offsetBy: 64, limitedBy: base64.endIndex) ?? base64.endIndex
            lines.append(String(base64[index..<end]))
            index = end
        }
        lines.append("-----END CERTIFICATE-----")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Standard base64 with padding (RFC 4648 §4).
func base64Encode(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
        let chunk = Array(bytes[index..<min(index + 3, bytes.count)])
        let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
        for position in 0..<4 {
            out.append(position <= chunk.count ? alphabet[Int((value >> (18 - 6 * UInt32(position))) & 0x3F)] : UInt8(ascii: "="))
        }
        index += 3
    }
    return String(decoding: out, as: UTF8.self)
}
