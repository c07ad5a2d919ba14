// libFuzzer target: the strict JSON parser (AppCheck.StrictJSON: RFC 8259, no duplicate keys, valid UTF-8,
// depth and size bounds), and the token parser's one pass over an object (`scanObject`) against it: the scan must
// accept exactly the objects `parse` accepts and keep the same value for every claim it reads. Never crashes.
@_spi(Fuzzing) import AppCheck

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for (depth, limit) in [(StrictJSON.defaultMaxDepth, StrictJSON.defaultMaxBytes), (3, 64)] {  // small bounds: limit paths
        let tree = Result { () throws(StrictJSON.ParseError) in try StrictJSON.parse(bytes, maxDepth: depth, maxBytes: limit) }
        if case .success(let value) = tree { precondition(value == value) }
        let scanned = StrictJSON.scannedClaims(bytes, maxDepth: depth, maxBytes: limit)
        guard case .success(.object(let members)) = tree else {
            precondition(scanned == nil, "scanObject accepted what parse refused")
            continue
        }
        guard let scanned else { preconditionFailure("scanObject refused an object parse accepted") }
        for (name, kept) in zip(StrictJSON.claimNames, scanned) {
            precondition(kept == members.first(where: { $0.key == name })?.value, "scanObject kept another \(name)")
        }
    }
    return 0
}
