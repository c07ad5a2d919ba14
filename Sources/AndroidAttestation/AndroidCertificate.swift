import COpenSSL

/// Owns one parsed OpenSSL `X509` of an Android attestation chain and frees it on deinit. Immutable after
/// parsing, so shareable.
final class AndroidCertificate: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The DER it was parsed from (for PEM input, re-encoded by OpenSSL).
    let der: [UInt8]

    /// Largest certificate accepted: real attestation certificates are 0.5–2 KB (an RSA-4096 root 1.3 KB).
    static let maxDERLength = 16_384

    /// Parses exactly one DER certificate with nothing after it; `nil` for anything else.
    init?(der: [UInt8]) {
        guard !der.isEmpty, der.count <= Self.maxDERLength else { return nil }
        var consumed = 0
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let x509 = d2i_X509(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return x509
        }
        guard let parsed else { ERR_clear_error(); return nil }
        guard consumed == der.count else { X509_free(parsed); return nil }
        pointer = parsed
        self.der = der
    }

    /// Every certificate of a PEM text, in order; empty when it holds none.
    static func all(pem: String) -> [AndroidCertificate] {
        let bytes = Array(pem.utf8)
        guard let bio = BIO_new(BIO_s_mem()) else { return [] }
        defer { BIO_free(bio) }
        guard bytes.withUnsafeBytes({ BIO_write(bio, $0.baseAddress, Int32($0.count)) }) == Int32(bytes.count) else { return [] }
        var out: [AndroidCertificate] = []
        while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) {
            var buffer: UnsafeMutablePointer<UInt8>? = nil
            let length = i2d_X509(x509, &buffer)
            X509_free(x509)
            guard length > 0, let buffer else { break }
            let der = Array(UnsafeBufferPointer(start: buffer, count: Int(length)))
            CRYPTO_free(buffer, #fileID, #line)
            guard let certificate = AndroidCertificate(der: der) else { break }
            out.append(certificate)
        }
        ERR_clear_error() // the loop ends on "no start line"
        return out
    }

    deinit { X509_free(pointer) }

    /// Every value of extension `oid` (dotted), in the certificate's order: one normally, two to let the
    /// caller refuse a repeated extension.
    func extensionValues(oid: String) -> [[UInt8]] {
        guard let object = OBJ_txt2obj(oid, 1) else { ERR_clear_error(); return [] }
        defer { ASN1_OBJECT_free(object) }
        var values: [[UInt8]] = []
        var index: Int32 = -1
        while true {
            index = X509_get_ext_by_OBJ(pointer, object, index)
            guard index >= 0 else { break }
            guard let ext = X509_get_ext(pointer, index), let data = X509_EXTENSION_get_data(ext),
                  let start = ASN1_STRING_get0_data(data) else { values.append([]); continue }
            let length = Int(ASN1_STRING_length(data))
            values.append(length > 0 ? Array(UnsafeBufferPointer(start: start, count: length)) : [])
        }
        return values
    }

    /// The SubjectPublicKeyInfo DER of the certificate's key, `nil` when OpenSSL cannot read the key (e.g. an
    /// ML-DSA key on OpenSSL 3.0).
    func publicKeySPKI() -> [UInt8]? {
        guard let key = X509_get0_pubkey(pointer) else { ERR_clear_error(); return nil }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_PUBKEY(key, &out)
        guard length > 0, let out else { ERR_clear_error(); return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// The serial number as the status list keys it: lowercase hexadecimal without leading zeros (Java's
    /// `BigInteger.toString(16)`); `"0"` for zero.
    func serialHex() -> String? {
        guard let serial = X509_get0_serialNumber(pointer), let bignum = ASN1_INTEGER_to_BN(serial, nil) else {
            ERR_clear_error()
            return nil
        }
        defer { BN_free(bignum) }
        guard let hex = BN_bn2hex(bignum) else { ERR_clear_error(); return nil }
        defer { CRYPTO_free(hex, #fileID, #line) }
        var text = String(cString: hex).lowercased()
        let negative = text.hasPrefix("-")
        if negative { text.removeFirst() }
        while text.count > 1, text.hasPrefix("0") { text.removeFirst() }
        return negative ? "-" + text : text
    }

    /// Whether the certificate is self-issued and its signature verifies with its own key.
    var isSelfSigned: Bool {
        let result = X509_check_issued(pointer, pointer) == X509_V_OK && {
            guard let key = X509_get0_pubkey(pointer) else { return false }
            return X509_verify(pointer, key) == 1
        }()
        ERR_clear_error()
        return result
    }
}
