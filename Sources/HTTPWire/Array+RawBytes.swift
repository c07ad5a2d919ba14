extension Array where Element == UInt8 {
    /// Appends raw bytes with one `memcpy`. `append(contentsOf:)` given an `UnsafeRawBufferPointer` went through the
    /// generic sequence path (about a hundred instructions a call before any byte moved, several per byte after),
    /// and the HTTP/2 paths append a dozen names and values per request this way.
    @inline(__always)
    mutating func appendBytes(_ bytes: UnsafeRawBufferPointer) {
        append(contentsOf: bytes.assumingMemoryBound(to: UInt8.self))
    }
}
