// libFuzzer target: the chunked transfer-coding decoder (HTTPWire.ChunkedDecoder), with a 64 KiB body limit.
// The input is decoded whole, then again arriving in two reads (split where its first byte says): the decoded
// data, where the body ends and the verdict must not depend on how the bytes arrived.
import HTTPWire

struct Outcome: Equatable {
    var data: [UInt8] = []
    /// `nil` while the body is unfinished.
    var end: Int?
    var error: HTTPParseError?
}

func decode(_ bytes: UnsafeRawBufferPointer, split: Int) -> Outcome {
    var decoder = ChunkedDecoder(maxBodyBytes: 64 << 10)
    var out = Outcome()
    var offset = 0
    for piece in [0..<split, split..<bytes.count] where out.end == nil && out.error == nil {
        let input = UnsafeRawBufferPointer(rebasing: bytes[piece])
        switch decoder.decode(input, onData: { out.data.append(contentsOf: $0) }) {
        case .consumed(let n): precondition(n == input.count, "consumed \(n) of \(input.count)")
        case .done(let consumed):
            precondition(consumed <= input.count)
            out.end = offset + consumed
        case .failure(let error): out.error = error
        }
        offset += input.count
    }
    precondition(decoder.bodyBytesDecoded == Int64(out.data.count) || out.error != nil)
    return out
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let whole = decode(bytes, split: size)
    guard size > 1 else { return 0 }
    let twoReads = decode(bytes, split: 1 + Int(bytes[0]) % (size - 1))
    precondition(whole == twoReads, "verdict depends on the split: \(whole) vs \(twoReads)")
    return 0
}
