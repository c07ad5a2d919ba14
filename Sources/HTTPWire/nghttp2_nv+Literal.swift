import CNghttp2

extension nghttp2_nv {
    /// A field whose name is a literal (a pseudo field or `te`), flag NONE: nghttp2 copies the name and the value and
    /// never writes through the pointers (its `nghttp2_nv` only declares them mutable). An empty value may come with
    /// no address: nghttp2 reads no byte of it, but wants a pointer, so the name's stands in.
    static func literal(_ name: StaticString, _ value: UnsafePointer<UInt8>?, _ count: Int) -> nghttp2_nv {
        nghttp2_nv(name: UnsafeMutablePointer(mutating: name.utf8Start),
                   value: UnsafeMutablePointer(mutating: value ?? name.utf8Start),
                   namelen: name.utf8CodeUnitCount, valuelen: count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
    }
}
