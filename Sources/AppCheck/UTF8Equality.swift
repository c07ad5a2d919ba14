import Glibc

/// Byte-for-byte equality of two strings' UTF-8 (no Unicode canonical equivalence: claims are compared as
/// the bytes the issuer wrote). Contiguous storage and one length check, not a generic iterator walk.
/// Read in place: a mutable copy of each string for `withUTF8` cost a retain and a release apiece, on every call
/// (`iss` and each required `aud` on every request, the `kid` on every token verified).
@inline(__always)
func utf8Equal(_ a: String, _ b: String) -> Bool {
    // memcmp (`bytesEqual`): the strings compared on every request (`iss`, each `aud`, the `kid`) are tens of bytes.
    let equal = a.utf8.withContiguousStorageIfAvailable { pa in
        b.utf8.withContiguousStorageIfAvailable { pb in bytesEqual(pa, pb) }
    }
    if let equal, let equal { return equal }
    // Only a string that is not native UTF-8 (never one the parser or the configuration made) comes here.
    return a.utf8.elementsEqual(b.utf8)
}

/// Byte-for-byte equality of two buffers (`memcmp` after one length check).
@inline(__always)
func bytesEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
    guard a.count == b.count else { return false }
    guard let x = a.baseAddress, let y = b.baseAddress else { return a.count == 0 }
    return memcmp(x, y, a.count) == 0
}
