import AppAttest
import COpenSSL

/// An EC private key made by OpenSSL for the simulator (P-256 for devices, P-384 for the CAs).
final class SimulatorKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(curve: String) throws(SimulatorError) {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw SimulatorError("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, curve) == 1,
              EVP_PKEY_generate(context, &key) == 1, let key else {
            ERR_clear_error()
            throw SimulatorError("EVP_PKEY_generate(\(curve))")
        }
        pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }

    /// SubjectPublicKeyInfo DER of the public half.
    func spki() throws(SimulatorError) -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_PUBKEY(pointer, &out)
        guard length > 0, let out else { ERR_clear_error(); throw SimulatorError("i2d_PUBKEY") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// DER ECDSA signature of `message` with SHA-256 (the signed digest is SHA-256(message)).
    func signSHA256(_ message: [UInt8]) throws(SimulatorError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw SimulatorError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else { ERR_clear_error(); throw SimulatorError("EVP_DigestSignInit") }
        var length = 80
        var signature = [UInt8](repeating: 0, count: length)
        let ok = signature.withUnsafeMutableBufferPointer { out in
            message.withUnsafeBufferPointer { EVP_DigestSign(context, out.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard ok == 1 else { ERR_clear_error(); throw SimulatorError("EVP_DigestSign") }
        return Array(signature.prefix(length))
    }
}

/// SHA-256 for the simulator.
func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    let ok = digest.withUnsafeMutableBufferPointer { out in
        bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, out.baseAddress, &length, EVP_sha256(), nil) }
    }
    precondition(ok == 1, "EVP_Digest(SHA-256) failed")
    return digest
}
