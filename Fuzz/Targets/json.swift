// libFuzzer target: the strict JSON parser (AppCheck.StrictJSON: RFC 8259, no duplicate keys, valid UTF-8,
// depth and size bounds). Never crashes on any input.
import AppCheck

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if case .success(let value) = Result(catching: { () throws(StrictJSON.ParseError) in try StrictJSON.parse(bytes) }) {
        precondition(value == value)
    }
    // Small bounds take the limit paths.
    _ = try? StrictJSON.parse(bytes, maxDepth: 3, maxBytes: 64)
    return 0
}
