import COpenSSL

/// Owns one parsed OpenSSL `X509` and frees it on deinit. Immutable after parsing, so shareable.
final class X509Certificate: @unchecked Sendable {
    let pointer: OpaquePointer

    /// Largest certificate accepted; Apple's are under 1.2 KB.
    static let maxDERLength = 8192

    /// Parses exactly one DER certificate with nothing after it.
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
    }

    /// Parses the first certificate of a PEM text.
    init?(pem: String) {
        let bytes = Array(pem.utf8)
        guard let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard bytes.withUnsafeBytes({ BIO_write(bio, $0.baseAddress, Int32($0.count)) }) == Int32(bytes.count),
              let parsed = PEM_read_bio_X509(bio, nil, nil, nil) else {
            ERR_clear_error()
            return nil
        }
        pointer = parsed
    }

    deinit { X509_free(pointer) }

    /// The value bytes of the one extension with `oid` (dotted), `nil` when absent or present twice.
    func extensionValue(oid: String) -> [UInt8]? {
        guard let object = OBJ_txt2obj(oid, 1) else { ERR_clear_error(); return nil }
        defer { ASN1_OBJECT_free(object) }
        let index = X509_get_ext_by_OBJ(pointer, object, -1)
        guard index >= 0, X509_get_ext_by_OBJ(pointer, object, index) < 0,
              let ext = X509_get_ext(pointer, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        let length = Int(ASN1_STRING_length(data))
        guard length >= 0, let start = ASN1_STRING_get0_data(data) else { return nil }
        return Array(UnsafeBufferPointer(start: start, count: length))
    }

    /// The SubjectPublicKeyInfo DER of the certificate's key.
    func publicKeySPKI() -> [UInt8]? {
        guard let key = X509_get0_pubkey(pointer) else { ERR_clear_error(); return nil }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_PUBKEY(key, &out)
        guard length > 0, let out else { ERR_clear_error(); return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
