import COpenSSL

/// A P-256 private key that signs ES256 (RFC 7518 §3.4) in the JOSE form R ‖ S (64 bytes): Apple's
/// DeviceCheck `.p8` keys (PKCS#8), custom-token test backends. Never on the verification path.
/// Immutable and safe to share between threads.
public struct ES256PrivateKey: Sendable {
    let key: EVPKey

    private init(key: EVPKey) { self.key = key }

    /// A fresh key.
    public static func generate() throws(ES256KeyError) -> ES256PrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_generate(context, &pkey) == 1, let pkey else {
            ERR_clear_error()
            throw .openSSL("EVP_PKEY_generate")
        }
        return ES256PrivateKey(key: EVPKey(taking: pkey))
    }

    /// Loads an unencrypted PEM private key: `PRIVATE KEY` (PKCS#8, what Apple's `.p8` files hold) or
    /// `EC PRIVATE KEY` (SEC 1). It must be on P-256.
    public init(pemRepresentation pem: String) throws(ES256KeyError) {
        guard let key = parsePEMPrivateKey(pem) else { throw .invalidEncoding("not an unencrypted PEM private key") }
        guard ES256PublicKey.isP256(key.pointer) else { throw .notP256 }
        self.key = key
    }

    /// The key as unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`, the `.p8` form).
    public func pemRepresentation() throws(ES256KeyError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, key.pointer, nil, nil, 0, nil, nil) == 1 else {
            ERR_clear_error()
            throw .openSSL("PEM_write_bio_PrivateKey")
        }
        return String(decoding: readAll(bio), as: UTF8.self)
    }

    /// The matching public key.
    public var publicKey: ES256PublicKey {
        get throws(ES256KeyError) {
            guard let der = key.publicKeyDER() else { throw .openSSL("i2d_PUBKEY") }
            return try ES256PublicKey(derRepresentation: der)
        }
    }

    /// The ES256 signature of `message` in JOSE form: R ‖ S, 64 bytes (RFC 7518 §3.4), not DER.
    public func signES256<Message: Collection>(_ message: Message) throws(ES256KeyError) -> [UInt8] where Message.Element == UInt8 {
        let bytes = Array(message)
        guard let context = EVP_MD_CTX_new() else { throw .openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else { ERR_clear_error(); throw .openSSL("EVP_DigestSignInit") }
        var length = 80
        var der = [UInt8](repeating: 0, count: length)
        let ok = der.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { EVP_DigestSign(context, out.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard ok == 1 else { ERR_clear_error(); throw .openSSL("EVP_DigestSign") }
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, length)
        }
        guard let parsed else { ERR_clear_error(); throw .openSSL("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(parsed) }
        var raw = [UInt8](repeating: 0, count: 64)
        let written = raw.withUnsafeMutableBufferPointer { out in
            (BN_bn2binpad(ECDSA_SIG_get0_r(parsed), out.baseAddress, 32), BN_bn2binpad(ECDSA_SIG_get0_s(parsed), out.baseAddress.map { $0 + 32 }, 32))
        }
        guard written.0 == 32, written.1 == 32 else { throw .openSSL("BN_bn2binpad") }
        return raw
    }
}
