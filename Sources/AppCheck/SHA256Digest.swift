import COpenSSL

/// SHA-256 (FIPS 180-4) over OpenSSL's EVP interface. Not named `SHA256`, which would clash with OpenSSL's C function in modules importing both.
public enum SHA256Digest {
    /// The 32-byte digest of `bytes`.
    public static func hash<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        if let digest = bytes.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0)) }) {
            return digest
        }
        return Array(bytes).withUnsafeBytes { hash($0) }
    }

    /// The 32-byte digest of the bytes at `input`.
    public static func hash(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        // The low-level one-shot (COpenSSL_sha256): no provider fetch and no context allocation per call.
        let digest = [UInt8](unsafeUninitializedCapacity: 32) { out, count in
            let ok = COpenSSL_sha256(input.baseAddress, input.count, out.baseAddress)
            // It cannot fail for valid arguments; an unset digest would be a silent collision, so stop.
            precondition(ok == 1, "SHA-256 failed")
            count = 32
        }
        return digest
    }

    /// The digest as 64 lowercase hex characters.
    public static func hex(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(digest.count * 2)
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
