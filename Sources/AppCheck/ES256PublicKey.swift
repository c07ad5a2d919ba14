import COpenSSL

/// A P-256 public key for ES256 (RFC 7518 §3.4): verifies JWS signatures in the JOSE form, the 64 bytes
/// R ‖ S (each 32 bytes, big-endian, left-padded), not DER. For custom tokens (docs/issuer.md) and tests.
/// Immutable and safe to share between threads.
public struct ES256PublicKey: Sendable {
    let key: EVPKey

    /// DER prefix of a P-256 SubjectPublicKeyInfo with an uncompressed point (id-ecPublicKey, prime256v1).
    static let spkiPrefix: [UInt8] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                                      0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00]

    init(key: EVPKey) { self.key = key }

    /// From the JWK members `x` and `y` (RFC 7518 §6.2.1), each exactly 32 bytes; the point must be on P-256.
    public init(x: [UInt8], y: [UInt8]) throws(ES256KeyError) {
        guard x.count == 32, y.count == 32 else { throw .invalidEncoding("x and y must be 32 bytes each") }
        try self.init(derRepresentation: Self.spkiPrefix + [0x04] + x + y)
    }

    /// From a SubjectPublicKeyInfo DER of a P-256 key.
    public init(derRepresentation der: [UInt8]) throws(ES256KeyError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let parsed else { ERR_clear_error(); throw .invalidEncoding("not a SubjectPublicKeyInfo") }
        let key = EVPKey(taking: parsed)
        guard Self.isP256(key.pointer) else { throw .notP256 }
        self.key = key
    }

    /// From a PEM `PUBLIC KEY` (SubjectPublicKeyInfo).
    public init(pemRepresentation pem: String) throws(ES256KeyError) {
        let parsed: OpaquePointer? = withMemoryBIO(Array(pem.utf8)) { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        guard let parsed else { ERR_clear_error(); throw .invalidEncoding("not a PEM public key") }
        let key = EVPKey(taking: parsed)
        guard Self.isP256(key.pointer) else { throw .notP256 }
        self.key = key
    }

    /// The SubjectPublicKeyInfo DER (91 bytes).
    public var derRepresentation: [UInt8]? { key.publicKeyDER() }

    /// True when `signature` (JOSE R ‖ S, exactly 64 bytes) verifies over `signingInput` with SHA-256.
    /// R and S must each be in 1…n-1 (OpenSSL checks the range).
    public func verifyES256<Input: Collection, Signature: Collection>(signingInput: Input, signature: Signature) -> Bool
    where Input.Element == UInt8, Signature.Element == UInt8 {
        let raw = Array(signature)
        guard raw.count == 64, let der = Self.derSignature(fromJOSE: raw) else { return false }
        let message = Array(signingInput)
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else { ERR_clear_error(); return false }
        let result = der.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { EVP_DigestVerify(context, sig.baseAddress, sig.count, $0.baseAddress, $0.count) }
        }
        ERR_clear_error()
        return result == 1
    }

    /// R ‖ S → DER `ECDSA-Sig-Value` (RFC 3279 §2.2.3).
    static func derSignature(fromJOSE raw: [UInt8]) -> [UInt8]? {
        guard let sig = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(sig) }
        let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress.map { $0 + 32 }, 32, nil) }
        guard let r, let s else { BN_free(r); BN_free(s); return nil }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else { BN_free(r); BN_free(s); return nil }
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_ECDSA_SIG(sig, &out)
        guard length > 0, let out else { ERR_clear_error(); return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    static func isP256(_ pointer: OpaquePointer) -> Bool {
        guard EVP_PKEY_is_a(pointer, "EC") == 1 else { return false }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pointer, "group", &name, name.count, &length) == 1 else { ERR_clear_error(); return false }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }
}
