import COpenSSL
import Synchronization

/// Owns one OpenSSL `EVP_PKEY` and frees it on deinit.
///
/// `@unchecked Sendable` because the pointer is never mutated after construction and OpenSSL 3 allows
/// concurrent verify/sign operations on one provider-native key, each with its own context.
final class EVPKey: @unchecked Sendable {
    let pointer: OpaquePointer
    /// `EVP_PKEY_CTX`s set up once for RS256 verification with this key (`EVP_PKEY_verify_init`, PKCS#1 v1.5
    /// padding, SHA-256 as the signature's digest), reused from call to call: each `EVP_PKEY_verify` works on one
    /// that no other thread holds meanwhile. Setting one up fetches the algorithms (~30,000 instructions), and even
    /// a per-call copy of a prepared context (`EVP_MD_CTX_copy_ex`, then freeing it) cost ~2,500; taking one from
    /// here and putting it back costs two uncontended locks.
    /// (Held as the pointers' bit patterns: `OpaquePointer` is not `Sendable`.)
    private let rs256Contexts = Mutex<[Int]>([])
    /// Contexts kept for reuse at most (one per thread verifying at once is enough; more are freed after use).
    static let rs256ContextLimit = 64
    /// `EVP_PKEY_CTX`s set up once for ECDSA verification of a digest with this EC key (`EVP_PKEY_verify_init`, the
    /// digest's algorithm set so that a digest of another length is refused), reused like `rs256Contexts`: a DPoP
    /// device key signs every proof, and setting a context up per proof (`EVP_DigestVerifyInit`) cost ~23,000
    /// instructions, a quarter of what a bound request cost beyond the verification itself.
    private let ecdsaContexts = Mutex<[Int]>([])

    /// Takes ownership of `pointer`.
    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        for bits in rs256Contexts.withLock({ $0 }) + ecdsaContexts.withLock({ $0 }) {
            EVP_PKEY_CTX_free(OpaquePointer(bitPattern: bits))
        }
        EVP_PKEY_free(pointer)
    }

    /// A context ready for `EVP_PKEY_verify` of a SHA-256 digest with RS256 and this key, from those kept for reuse
    /// or new; nil when OpenSSL cannot make one. Give it back with `returnRS256Context` after a verification that
    /// succeeded, else free it (`EVP_PKEY_CTX_free`).
    func takeRS256Context() -> OpaquePointer? {
        if let bits = rs256Contexts.withLock({ $0.popLast() }) { return OpaquePointer(bitPattern: bits) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else { ERR_clear_error(); return nil }
        guard EVP_PKEY_verify_init(ctx) == 1,
              EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1,
              EVP_PKEY_CTX_set_signature_md(ctx, EVP_sha256()) == 1 else {
            ERR_clear_error()
            EVP_PKEY_CTX_free(ctx)
            return nil
        }
        return ctx
    }

    /// Keeps `ctx` (from `takeRS256Context`) for the next verification, or frees it when enough are kept.
    func returnRS256Context(_ ctx: OpaquePointer) { Self.keep(ctx, in: rs256Contexts) }

    /// A context ready for `EVP_PKEY_verify` of a `digest` (`EVP_sha256()` for P-256, `EVP_sha384()` for P-384) with
    /// this EC key and a DER `ECDSA-Sig-Value`, from those kept for reuse or new; nil when OpenSSL cannot make one. Give
    /// it back with `returnECDSAContext` after a verification that succeeded, else free it. One key, one digest: a
    /// DPoP key's algorithm fixes its curve, and the curve its digest.
    func takeECDSAContext(digest: OpaquePointer?) -> OpaquePointer? {
        if let bits = ecdsaContexts.withLock({ $0.popLast() }) { return OpaquePointer(bitPattern: bits) }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else { ERR_clear_error(); return nil }
        guard EVP_PKEY_verify_init(ctx) == 1, EVP_PKEY_CTX_set_signature_md(ctx, digest) == 1 else {
            ERR_clear_error()
            EVP_PKEY_CTX_free(ctx)
            return nil
        }
        return ctx
    }

    /// Keeps `ctx` (from `takeECDSAContext`) for the next verification, or frees it when enough are kept.
    func returnECDSAContext(_ ctx: OpaquePointer) { Self.keep(ctx, in: ecdsaContexts) }

    /// Puts `ctx` back in `pool` while it holds fewer than `rs256ContextLimit`, else frees it.
    private static func keep(_ ctx: OpaquePointer, in pool: borrowing Mutex<[Int]>) {
        let bits = Int(bitPattern: ctx)
        let kept = pool.withLock { contexts -> Bool in
            guard contexts.count < rs256ContextLimit else { return false }
            contexts.append(bits)
            return true
        }
        if !kept { EVP_PKEY_CTX_free(ctx) }
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
