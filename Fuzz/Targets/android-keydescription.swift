// libFuzzer target: the Android Key Attestation DER reader (AndroidAttestation.DERReader through KeyDescription and
// AttestationApplicationID: minimal lengths and tags, no indefinite form, depth and size caps, ascending tags).
// Never crashes; parsing is a pure function, and every proper prefix of an accepted input is `.truncated`.
import AndroidAttestation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let first = Result { () throws(DERError) in try KeyDescription(der: bytes) }
    let second = Result { () throws(DERError) in try KeyDescription(der: bytes) }
    switch (first, second) {
    case let (.success(a), .success(b)): precondition(a == b)
    case let (.failure(a), .failure(b)): precondition(a == b)
    default: preconditionFailure("two verdicts for one input")
    }
    if case .success = first, bytes.count <= 4096 {
        // Byte by byte: a cut anywhere asks for more bytes and says nothing else.
        for length in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 64)) {
            do {
                _ = try KeyDescription(der: Array(bytes.prefix(length)))
                preconditionFailure("a proper prefix parsed")
            } catch {
                precondition(error.kind == .truncated)
            }
        }
    }
    _ = try? AttestationApplicationID(der: bytes)
    return 0
}
