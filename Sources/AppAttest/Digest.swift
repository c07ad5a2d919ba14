import COpenSSL

/// SHA-256 and constant-time comparison over OpenSSL, for this module only (it may not import AppCheck).
enum Digest {
    /// The 32-byte SHA-256 digest of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        // The same low-level one-shot as AppCheck's SHA256Digest (COpenSSL_sha256: no provider fetch per call).
        [UInt8](unsafeUninitializedCapacity: 32) { out, count in
            let ok = bytes.withUnsafeBytes { COpenSSL_sha256($0.baseAddress, $0.count, out.baseAddress) }
            // It cannot fail for valid arguments; an unset digest would be a silent collision, so stop.
            precondition(ok == 1, "SHA-256 failed")
            count = 32
        }
    }

    /// True when `a` and `b` are equal, in time independent of where they differ (lengths are not secret).
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }
}
