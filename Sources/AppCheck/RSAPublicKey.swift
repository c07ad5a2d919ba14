import COpenSSL

/// An RSA public key for RS256 (RSASSA-PKCS1-v1_5 with SHA-256, RFC 8017 §8.2; RFC 7518 §3.3).
///
/// Immutable and safe to share between threads: each `verifyRS256` call holds its own verification context (one of
/// the key's prepared ones) while it runs.
/// Construction does not enforce a size policy; `JWKSet` does (2048…4096 bits).
public struct RSAPublicKey: Sendable {
    let key: EVPKey

    /// `EVP_PKEY_PUBLIC_KEY` (a composite macro Swift cannot import): all parameters (0x84) | public key (0x02).
    private static let selectPublicKey: Int32 = OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS
        | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY

    private static func cName(_ name: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    init(key: EVPKey) {
        self.key = key
    }

    /// Builds the key from the JWK members `n` and `e` (RFC 7518 §6.3.1), as unsigned big-endian bytes.
    ///
    /// Refuses an empty or even modulus, and an exponent that is empty, even, below 3 or wider than 64 bits.
    public init(modulus: [UInt8], exponent: [UInt8]) throws(RSAKeyError) {
        let n = Array(modulus.drop(while: { $0 == 0 }))
        let e = Array(exponent.drop(while: { $0 == 0 }))
        guard let nLast = n.last, nLast & 1 == 1 else { throw .invalidEncoding("modulus empty or even") }
        guard let eLast = e.last, eLast & 1 == 1, e.count <= 8, e.count > 1 || eLast >= 3 else {
            throw .invalidEncoding("exponent must be odd, at least 3 and at most 64 bits")
        }
        guard let nBN = n.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
            throw .openSSL("BN_bin2bn")
        }
        defer { BN_free(nBN) }
        guard let eBN = e.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, Int32($0.count), nil) }) else {
            throw .openSSL("BN_bin2bn")
        }
        defer { BN_free(eBN) }
        guard let builder = OSSL_PARAM_BLD_new() else { throw .openSSL("OSSL_PARAM_BLD_new") }
        defer { OSSL_PARAM_BLD_free(builder) }
        // The builder keeps the name pointers until OSSL_PARAM_BLD_to_param, so they must be static storage,
        // not temporaries bridged from Swift strings.
        guard OSSL_PARAM_BLD_push_BN(builder, Self.cName("n"), nBN) == 1,
              OSSL_PARAM_BLD_push_BN(builder, Self.cName("e"), eBN) == 1,
              let params = OSSL_PARAM_BLD_to_param(builder) else {
            ERR_clear_error()
            throw .openSSL("OSSL_PARAM_BLD")
        }
        defer { OSSL_PARAM_free(params) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_fromdata_init(ctx) == 1,
              EVP_PKEY_fromdata(ctx, &pkey, Self.selectPublicKey, params) == 1,
              let pkey else {
            throw .openSSL(openSSLErrorText("EVP_PKEY_fromdata"))
        }
        self.key = EVPKey(taking: pkey)
    }

    /// Loads a DER SubjectPublicKeyInfo (RFC 5280 §4.1.2.7) holding an RSA key.
    public init(derRepresentation der: [UInt8]) throws(RSAKeyError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let parsed else { ERR_clear_error(); throw .invalidEncoding("not a DER SubjectPublicKeyInfo") }
        let key = EVPKey(taking: parsed)
        guard key.isRSA else { throw .notRSA }
        self.key = key
    }

    /// Loads a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) holding an RSA key.
    public init(pemRepresentation pem: String) throws(RSAKeyError) {
        let parsed: OpaquePointer? = withMemoryBIO(Array(pem.utf8)) { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        guard let parsed else { ERR_clear_error(); throw .invalidEncoding("not a PEM PUBLIC KEY") }
        let key = EVPKey(taking: parsed)
        guard key.isRSA else { throw .notRSA }
        self.key = key
    }

    /// Modulus size in bits.
    public var bits: Int { key.bits }

    /// The modulus `n`, unsigned big-endian without leading zeros.
    public var modulus: [UInt8] { key.bigEndianParameter("n") ?? [] }

    /// The public exponent `e`, unsigned big-endian without leading zeros.
    public var exponent: [UInt8] { key.bigEndianParameter("e") ?? [] }

    /// The DER SubjectPublicKeyInfo, or `nil` if OpenSSL cannot encode it.
    public var derRepresentation: [UInt8]? { key.publicKeyDER() }

    /// The public JWK members for this key: `kty`, `use` (`sig`), `alg` (`RS256`), `kid`, `n`, `e`.
    public func jwk(kid: String) -> [String: String] {
        ["kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
         "n": Base64URL.encode(modulus), "e": Base64URL.encode(exponent)]
    }

    /// True when `signature` is a valid RSASSA-PKCS1-v1_5 SHA-256 signature of `signingInput`.
    ///
    /// The signature must be exactly as long as the modulus (RFC 8017 §8.2.2 step 1). Thread-safe.
    public func verifyRS256<Input: Collection, Signature: Collection>(signingInput: Input, signature: Signature) -> Bool
    where Input.Element == UInt8, Signature.Element == UInt8 {
        let input = signingInput.withContiguousStorageIfAvailable { verify(UnsafeRawBufferPointer($0), signature) }
        return input ?? Array(signingInput).withUnsafeBytes { verify($0, signature) }
    }

    private func verify<Signature: Collection>(_ input: UnsafeRawBufferPointer, _ signature: Signature) -> Bool
    where Signature.Element == UInt8 {
        let sig = signature.withContiguousStorageIfAvailable { verify(input, UnsafeRawBufferPointer($0)) }
        return sig ?? Array(signature).withUnsafeBytes { verify(input, $0) }
    }

    private func verify(_ input: UnsafeRawBufferPointer, _ signature: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == Int(EVP_PKEY_get_size(key.pointer)) else { return false }
        guard let ctx = key.takeRS256Context() else { return false }
        // RSASSA-PKCS1-v1_5 verification of the SHA-256 digest (RFC 8017 §8.2.2): OpenSSL checks the padding and the
        // DigestInfo encoding for SHA-256 exactly, as EVP_DigestVerify does after hashing (the same provider call).
        var digest: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let result = withUnsafeMutableBytes(of: &digest) { digest -> Int32 in
            let out = digest.baseAddress!.assumingMemoryBound(to: UInt8.self)
            guard Self.rs256Digest(input, into: out) else { return 0 }
            return EVP_PKEY_verify(ctx, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count,
                                   out, 32)
        }
        if result == 1 {
            key.returnRS256Context(ctx)
        } else {
            // Not kept: a context that saw a failure starts no later verification.
            ERR_clear_error()
            EVP_PKEY_CTX_free(ctx)
        }
        return result == 1
    }

    /// SHA-256 of the signing input into the 32 bytes at `out` (the hash half of RS256; a function of its own, never
    /// inlined, so that profiles can add it to the RSA operation: Benchmarks/callgrind.sh).
    @inline(never)
    static func rs256Digest(_ input: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) -> Bool {
        COpenSSL_sha256(input.baseAddress, input.count, out) == 1
    }
}
