// libFuzzer target: the RESP reply reader of the Redis clients (ReplayStores.RESP.parse, read by RedisConnection for
// the replay store and the issuer's state): strict lines, bounded bulk strings and arrays, nesting at most 4 deep.
// Replies are read one after another as the connection does. Never crashes; a reply reads the same from exactly its
// own bytes, and any shorter cut of it asks for more bytes (never a different reply or an error).
import ReplayStores

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    var offset = 0
    var replies = 0
    while offset < size, replies < 256 {
        let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
        guard case let .value(value, consumed) = RESP.parse(rest) else { break }
        precondition(consumed > 0 && consumed <= rest.count)
        let own = UnsafeRawBufferPointer(rebasing: rest[..<consumed])
        precondition(RESP.parse(own) == .value(value, consumed: consumed))
        // Two cuts: the last byte missing, and one derived from the reply's own bytes.
        for cut in Set([consumed - 1, Int(rest[consumed - 1]) % consumed]) {
            precondition(RESP.parse(UnsafeRawBufferPointer(rebasing: rest[..<cut])) == .needMore)
        }
        offset += consumed
        replies += 1
    }
    return 0
}
