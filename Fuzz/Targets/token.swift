// libFuzzer target: the App Check token parser (AppCheck.AppCheckToken.parse: compact JWS split, strict
// base64url, strict JSON header and payload, header rules). Never crashes; a success is self-consistent.
import AppCheck

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let token = Array(UnsafeBufferPointer(start: data, count: size))
    if case .success(let parsed) = AppCheckToken.parse(token) {
        precondition(parsed.token == token && !parsed.kid.isEmpty)
        precondition(parsed.signingInputRange.upperBound <= token.count)
    }
    return 0
}
