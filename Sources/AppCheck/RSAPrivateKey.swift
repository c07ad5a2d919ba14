import COpenSSL

/// An RSA private key for signing RS256 tokens: the `keygen` and `mint` commands, local issuers and tests.
///
/// Never used on the verification path. Immutable and safe to share between threads.
public struct RSAPrivateKey: Sendable {
    let key: EVPKey

    /// Key sizes `generate` accepts.
    public static let supportedSizes: Set<Int> = [2048, 3072, 4096]

    private init(key: EVPKey) {
        self.key = key
    }

    /// Generates a fresh key with public exponent 65537; `bits` must be 2048, 3072 or 4096.
    public static func generate(bits: Int = 2048) throws(RSAKeyError) -> RSAPrivateKey {
        guard supportedSizes.contains(bits) else { throw .unsupportedSize(bits) }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(ctx) == 1,
              EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1,
              EVP_PKEY_generate(ctx, &pkey) == 1,
              let pkey else {
            ERR_clear_error()
            throw .openSSL("EVP_PKEY_generate")
        }
        return RSAPrivateKey(key: EVPKey(taking: pkey))
    }

    /// Loads an unencrypted PEM private key (`PRIVATE KEY` PKCS#8, or `RSA PRIVATE KEY` PKCS#1).
    public init(pemRepresentation pem: String) throws(RSAKeyError) {
        guard let key = parsePEMPrivateKey(pem) else { throw .invalidEncoding("not an unencrypted PEM private key") }
        guard key.isRSA else { throw .notRSA }
        self.key = key
    }

    /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    public func pemRepresentation() throws(RSAKeyError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key.pointer, nil, nil, 0, nil, nil) == 1 else {
            ERR_clear_error()
            throw .openSSL("PEM_write_bio_PrivateKey")
        }
        return String(decoding: readAll(bio), as: UTF8.self)
    }

    /// Modulus size in bits.
    public var bits: Int { key.bits }

    /// The matching public key.
    public var publicKey: RSAPublicKey {
        get throws(RSAKeyError) {
            guard let n = key.bigEndianParameter("n"), let e = key.bigEndianParameter("e") else {
                throw .openSSL("EVP_PKEY_get_bn_param")
            }
            return try RSAPublicKey(modulus: n, exponent: e)
        }
    }

    /// RSASSA-PKCS1-v1_5 SHA-256 signature of `message`, as long as the modulus.
    public func signRS256<Message: Collection>(_ message: Message) throws(RSAKeyError) -> [UInt8] where Message.Element == UInt8 {
        let bytes = Array(message)
        guard let ctx = EVP_MD_CTX_new() else { throw .openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        var pctx: OpaquePointer? = nil
        guard EVP_DigestSignInit(ctx, &pctx, EVP_sha256(), nil, key.pointer) == 1,
              EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) == 1 else {
            ERR_clear_error()
            throw .openSSL("EVP_DigestSignInit")
        }
        var length = Int(EVP_PKEY_get_size(key.pointer))
        var signature = [UInt8](repeating: 0, count: length)
        let ok = signature.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { input in
                EVP_DigestSign(ctx, out.baseAddress, &length, input.baseAddress, input.count)
            }
        }
        guard ok == 1 else { ERR_clear_error(); throw .openSSL("EVP_DigestSign") }
        return Array(signature.prefix(length))
    }
}
