// libFuzzer target: whole App Attest attestation and assertion objects through AppAttest.AppAttestVerifier (CBOR,
// x5c DER, the chain to Apple's root, nonce extension, authenticator data; assertion signature over a fixed key).
// Never crashes; hostile input is refused with one named rule.
import AppAttest

private let verifier: AppAttestVerifier = {
    guard let v = try? AppAttestVerifier() else { fatalError("Apple's built-in root must load") }
    return v
}()
private let appId = AppAttestAppID(teamId: "0352187391", bundleId: "com.example.app")
private let key: AppAttestPublicKey? = try? AppAttestPublicKey(uncompressedPoint: [0x04] + [UInt8](repeating: 1, count: 64))

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? verifier.verifyAttestation(bytes, keyId: [UInt8](repeating: 7, count: 32),
                                        clientDataHash: [UInt8](repeating: 9, count: 32), appId: appId,
                                        environments: [.production, .development], at: 1_700_000_000)
    if let key {
        _ = try? verifier.verifyAssertion(bytes, clientData: [1, 2, 3], publicKey: key, appId: appId)
    }
    return 0
}
