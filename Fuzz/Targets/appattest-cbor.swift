// libFuzzer target: the App Attest CBOR reader (AppAttest.CBORDecoder: definite lengths, shortest forms, depth,
// item and size caps, no trailing bytes, no duplicate keys). Never crashes; decoding is a pure function.
import AppAttest

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let first = try? CBORDecoder.decode(bytes)
    let second = try? CBORDecoder.decode(bytes)
    precondition((first == nil) == (second == nil))
    return 0
}
