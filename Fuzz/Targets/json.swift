// libFuzzer target: the strict JSON parser (AppCheck.StrictJSON: RFC 8259, no duplicate keys, valid UTF-8,
// depth and size bounds), and the token parser's one pass over an object (`scanObject`) against it: the scan must
// accept exactly the objects `parse` accepts and keep the same value for every claim it reads; so must the DPoP
// proof payload's one pass (`DPoPClaims.scan`, through `scannedDPoPClaims`) for `htm`, `htu`, `iat`, `ath`, `jti`.
// Never crashes.
@_spi(Fuzzing) import AppCheck

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for (depth, limit) in [(StrictJSON.defaultMaxDepth, StrictJSON.defaultMaxBytes), (3, 64)] {  // small bounds: limit paths
        let tree = Result { () throws(StrictJSON.ParseError) in try StrictJSON.parse(bytes, maxDepth: depth, maxBytes: limit) }
        if case .success(let value) = tree { precondition(value == value) }
        let scanned = StrictJSON.scannedClaims(bytes, maxDepth: depth, maxBytes: limit)
        let dpop = StrictJSON.scannedDPoPClaims(bytes, maxDepth: depth, maxBytes: limit)
        guard case .success(.object(let members)) = tree else {
            precondition(scanned == nil, "scanObject accepted what parse refused")
            precondition(dpop == nil, "DPoPClaims.scan accepted what parse refused")
            continue
        }
        guard let dpop else { preconditionFailure("DPoPClaims.scan refused an object parse accepted") }
        for (name, kept) in zip(StrictJSON.dpopClaimNames, dpop) {
            precondition(kept == members.first(where: { $0.key.utf8.elementsEqual(name.utf8) })?.value,
                         "DPoPClaims.scan kept another \(name)")
        }
        guard let scanned else { preconditionFailure("scanObject refused an object parse accepted") }
        for (name, kept) in zip(StrictJSON.claimNames, scanned) {
            precondition(kept == members.first(where: { $0.key == name })?.value, "scanObject kept another \(name)")
        }
    }
    return 0
}
