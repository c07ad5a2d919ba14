import COpenSSL

/// An App Attest credential public key: a P-256 point, kept as the 65-byte uncompressed X9.62 encoding
/// `04 ‖ X ‖ Y` (what the key ID hashes, and what the issuer stores).
public struct AppAttestPublicKey: Sendable, Equatable {
    /// `04 ‖ X ‖ Y`, 65 bytes.
    public let uncompressedPoint: [UInt8]

    /// The DER prefix of a P-256 SubjectPublicKeyInfo (id-ecPublicKey, prime256v1, a 66-byte BIT STRING).
    static let spkiPrefix: [UInt8] = [0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                                      0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00]

    /// Accepts 65 bytes starting with 0x04 that decode to a point on P-256; `nil` otherwise.
    public init?(uncompressedPoint point: [UInt8]) {
        guard point.count == 65, point[0] == 0x04 else { return nil }
        self.uncompressedPoint = point
        guard makeKey() != nil else { return nil }
    }

    /// Accepts a P-256 SubjectPublicKeyInfo DER in exactly the uncompressed form; `nil` otherwise.
    public init?(spki der: [UInt8]) {
        guard der.count == 91, Array(der[0..<26]) == Self.spkiPrefix else { return nil }
        self.init(uncompressedPoint: Array(der[26...]))
    }

    /// The key as SubjectPublicKeyInfo DER (91 bytes).
    public var spkiDER: [UInt8] { Self.spkiPrefix + uncompressedPoint }

    /// The App Attest key ID: SHA-256 of the uncompressed point.
    public var keyId: [UInt8] { Digest.sha256(uncompressedPoint) }

    /// True when `signature` (DER ECDSA, at most 72 bytes) verifies over `message` with SHA-256
    /// (ECDSA-with-SHA256: the signed digest is SHA-256(message)). OpenSSL refuses non-canonical DER.
    public func verifyECDSASHA256(signature: [UInt8], message: [UInt8]) -> Bool {
        guard (8...72).contains(signature.count), signature[0] == 0x30 else { return false }
        guard let key = makeKey() else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { ERR_clear_error(); return false }
        let result = signature.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { msg in
                EVP_DigestVerify(context, sig.baseAddress, sig.count, msg.baseAddress, msg.count)
            }
        }
        ERR_clear_error()
        return result == 1
    }

    /// A fresh `EVP_PKEY` for the point, or `nil` when it is not on the curve. The caller frees it.
    private func makeKey() -> OpaquePointer? {
        let der = spkiDER
        let key: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        if key == nil { ERR_clear_error() }
        return key
    }
}
