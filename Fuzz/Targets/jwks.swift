// libFuzzer target: the JWK set parser (AppCheck.JWKSet.parse: strict JSON, RSA keys built through OpenSSL,
// skipped keys and their reasons). Never crashes on any input.
import AppCheck

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let set = try? JWKSet.parse(bytes) {
        _ = set.key(for: "kid")
    }
    return 0
}
