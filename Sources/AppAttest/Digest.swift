import COpenSSL

/// SHA-256 and constant-time comparison over OpenSSL, for this module only (it may not import AppCheck).
enum Digest {
    /// The 32-byte SHA-256 digest of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let ok = digest.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, out.baseAddress, &length, EVP_sha256(), nil) }
        }
        // Fails only on allocation failure; an all-zero digest would be a silent collision, so stop.
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return digest
    }

    /// True when `a` and `b` are equal, in time independent of where they differ (lengths are not secret).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }
}
