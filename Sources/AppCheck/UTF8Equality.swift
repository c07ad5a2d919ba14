import Glibc

/// Byte-for-byte equality of two strings' UTF-8 (no Unicode canonical equivalence: claims are compared as
/// the bytes the issuer wrote). Contiguous storage and one length check, not a generic iterator walk.
@inline(__always)
func utf8Equal(_ a: String, _ b: String) -> Bool {
    var a = a
    var b = b
    return a.withUTF8 { pa in
        b.withUTF8 { pb in
            guard pa.count == pb.count else { return false }
            guard let x = pa.baseAddress, let y = pb.baseAddress else { return pa.count == 0 }
            // memcmp: the strings compared on every request (`iss`, each `aud`, the `kid`) are tens of bytes.
            return memcmp(x, y, pa.count) == 0
        }
    }
}

/// Byte-for-byte equality of two buffers (`memcmp` after one length check).
@inline(__always)
func bytesEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
    guard a.count == b.count else { return false }
    guard let x = a.baseAddress, let y = b.baseAddress else { return a.count == 0 }
    return memcmp(x, y, a.count) == 0
}
