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

    /// A digest held in place: four words, no array (the replay key of every limited-use token is one, and an
    /// array cost an allocation per token). `words.0` holds bytes 0–7 in memory order, and so on.
    public struct Value: Hashable, Sendable {
        public var words: (UInt64, UInt64, UInt64, UInt64)

        public init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

        /// The 32 bytes, in order.
        public var bytes: [UInt8] {
            var copy = words
            return withUnsafeBytes(of: &copy) { Array($0) }
        }

        public static func == (a: Value, b: Value) -> Bool {
            a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(words.0); hasher.combine(words.1); hasher.combine(words.2); hasher.combine(words.3)
        }
    }

    /// The digest of the bytes at `input`, in place.
    public static func value(_ input: UnsafeRawBufferPointer) -> Value {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let ok = withUnsafeMutableBytes(of: &words) {
            COpenSSL_sha256(input.baseAddress, input.count, $0.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        precondition(ok == 1, "SHA-256 failed")
        return Value(words: words)
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
