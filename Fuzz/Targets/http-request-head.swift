// libFuzzer target: the HTTP/1 request-head parser (HTTPWire.HTTPRequestHeadParser).
// The input is parsed whole, then again arriving in two reads (split where its first byte says): the parser
// keeps state across calls, and the verdict must not depend on how the bytes arrived.
import HTTPWire

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    var parser = HTTPRequestHeadParser()
    let whole = parser.parse(bytes)
    guard size > 1 else { return 0 }
    let split = 1 + Int(bytes[0]) % (size - 1)
    var incremental = HTTPRequestHeadParser()
    var twoReads = incremental.parse(UnsafeRawBufferPointer(rebasing: bytes[0..<split]))
    if case .needMore = twoReads { twoReads = incremental.parse(bytes) }
    switch (whole, twoReads) {
    case (.complete(let a, let n), .complete(let b, let m)): precondition(a == b && n == m, "\(a) \(n) vs \(b) \(m)")
    case (.failure(let a), .failure(let b)): precondition(a == b, "\(a) vs \(b)")
    case (.needMore, .needMore): break
    default: preconditionFailure("verdict depends on the split at \(split): \(whole) vs \(twoReads)")
    }
    return 0
}
