// libFuzzer target: WebAuthn/App Attest authenticator data (AppAttest.AuthenticatorData) as attestation and as
// assertion: fixed header, attested credential data with its COSE key, an optional trailing extensions map.
import AppAttest

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? AuthenticatorData(bytes, kind: .attestation)
    _ = try? AuthenticatorData(bytes, kind: .assertion)
    return 0
}
