import COpenSSL
import Synchronization

/// Owns one OpenSSL `EVP_PKEY` and frees it on deinit.
///
/// `@unchecked Sendable` because the pointer is never mutated after construction and OpenSSL 3 allows
/// concurrent verify/sign operations on one provider-native key, each with its own `EVP_MD_CTX`.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer
    /// An `EVP_MD_CTX` set up once for RS256 verification with this key (`EVP_DigestVerifyInit`, SHA-256, PKCS#1
    /// v1.5 padding). Each verification works on a copy: copying costs ~2,000 instructions where a fresh init
    /// fetches the algorithms again (~30,000). Copies are taken under the lock, so the template is never read
    /// by two threads at once.
    /// (Held as the pointer's bit pattern, 0 for none: `OpaquePointer` is not `Sendable`.)
    private let rs256Template = Mutex<Int>(0)

    /// Takes ownership of `pointer`.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        rs256Template.withLock { template in
            if let pointer = OpaquePointer(bitPattern: template) { EVP_MD_CTX_free(pointer) }
        }
        EVP_PKEY_free(pointer)
    }

    /// A new context ready for one `EVP_DigestVerify` with RS256 and this key (the caller frees it), or nil when
    /// OpenSSL cannot make one.
    func newRS256VerifyContext() -> OpaquePointer? {
        guard let ctx = EVP_MD_CTX_new() else { return nil }
        let ctxBits = Int(bitPattern: UnsafeRawPointer(ctx))
        let keyBits = Int(bitPattern: UnsafeRawPointer(pointer))
        let ok = rs256Template.withLock { template -> Bool in
            if template == 0 {
                guard let fresh = EVP_MD_CTX_new() else { return false }
                var pctx: OpaquePointer? = nil
                guard EVP_DigestVerifyInit(fresh, &pctx, EVP_sha256(), nil, OpaquePointer(bitPattern: keyBits)) == 1,
                      EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) == 1 else {
                    EVP_MD_CTX_free(fresh)
                    return false
                }
                template = Int(bitPattern: UnsafeRawPointer(fresh))
            }
            return EVP_MD_CTX_copy_ex(OpaquePointer(bitPattern: ctxBits), OpaquePointer(bitPattern: template)) == 1
        }
        guard ok else {
            ERR_clear_error()
            EVP_MD_CTX_free(ctx)
            return nil
        }
        // Single use: without this flag EVP_DigestVerifyFinal duplicates the key context (EVP_PKEY_CTX_dup and
        // _free, ~1,900 instructions) so that the caller could go on with it; the caller frees it instead.
        EVP_MD_CTX_set_flags(ctx, EVP_MD_CTX_FLAG_FINALISE)
        return ctx
    }

    /// Size of the modulus in bits.
    var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }

    /// True for an RSA key (PKCS#1 `rsaEncryption`; RSA-PSS-only keys are not RSA here).
    var isRSA: Bool { EVP_PKEY_is_a(pointer, "RSA") == 1 }

    /// A big-number parameter (`"n"`, `"e"`) as unsigned big-endian bytes without leading zeros.
    func bigEndianParameter(_ name: String) -> [UInt8]? {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pointer, name, &bn) == 1, let bn else {
            ERR_clear_error()
            return nil
        }
        defer { BN_free(bn) }
        let count = (Int(BN_num_bits(bn)) + 7) / 8
        var out = [UInt8](repeating: 0, count: count)
        let written = out.withUnsafeMutableBufferPointer { BN_bn2bin(bn, $0.baseAddress) }
        guard Int(written) == count else { return nil }
        return out
    }

    /// The SubjectPublicKeyInfo DER of this key.
    func publicKeyDER() -> [UInt8]? {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_PUBKEY(pointer, &out)
        guard length > 0, let out else { ERR_clear_error(); return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}

/// Reads everything written to an OpenSSL memory BIO.
func readAll(_ bio: OpaquePointer) -> [UInt8] {
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32($0.count)) }
        if n <= 0 { break }
        out.append(contentsOf: chunk[0..<Int(n)])
    }
    return out
}

/// A memory BIO over a copy of `bytes`, for the PEM readers.
func withMemoryBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) -> T?) -> T? {
    guard let bio = BIO_new(BIO_s_mem()) else { return nil }
    defer { BIO_free(bio) }
    let written = bytes.withUnsafeBytes { BIO_write(bio, $0.baseAddress, Int32($0.count)) }
    guard written == Int32(bytes.count) || bytes.isEmpty else { return nil }
    return body(bio)
}

/// An unencrypted PEM private key of any type (`PRIVATE KEY` PKCS#8, or the type-specific forms), nil when `pem`
/// holds none. The empty passphrase callback keeps OpenSSL from prompting on a terminal for encrypted keys.
func parsePEMPrivateKey(_ pem: String) -> EVPKey? {
    let parsed: OpaquePointer? = withMemoryBIO(Array(pem.utf8)) { bio in
        PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
    }
    guard let parsed else {
        ERR_clear_error()
        return nil
    }
    return EVPKey(taking: parsed)
}

/// The oldest queued OpenSSL error as text (for error messages), and the queue cleared.
func openSSLErrorText(_ operation: String) -> String {
    let code = ERR_get_error()
    ERR_clear_error()
    guard code != 0 else { return operation }
    var buffer = [CChar](repeating: 0, count: 256)
    ERR_error_string_n(code, &buffer, buffer.count)
    let text = buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }
    return operation + ": " + String(decoding: text, as: UTF8.self)
}
