/// Per-stream state of an `H2ClientSession`: the request body being sent, the response being received.
final class H2ClientStream: H2OutgoingBody {
    let id: Int32

    // Request side.
    var out: [UInt8] = []
    var outOffset = 0
    /// No more request body will be queued (END_STREAM, or the trailers, after `out`).
    var endQueued = false
    /// Request trailers sent after the body instead of END_STREAM on the last DATA.
    var trailers: H2HeaderList?
    var deferred = false
    var aboveLowWatermark = false

    // Response side.
    enum Phase { case head, body, trailers, done }
    var phase = Phase.head
    var status = 0
    var interimHeads = 0
    var block: [UInt8] = []
    var fields: [HTTPHeaderField] = []
    var headerBytes = 0
    var headerCount = 0
    /// The request's method is HEAD: the response has no content (RFC 9110 §9.3.2).
    var headRequest = false
    /// The response's `content-length` (0 for one that has no content: to HEAD, a 204, a 304), held against the DATA
    /// received (RFC 9113 §8.1.1).
    var contentLength: Int64?
    /// DATA payload bytes of the response received so far.
    var receivedBodyBytes: Int64 = 0
    /// The response broke a rule; the stream was reset by the session and is reported `malformed`.
    var malformed = false
    /// The delegate reset the stream itself: nothing more is reported.
    var abandoned = false

    init(id: Int32) { self.id = id }

    var bufferedBytes: Int { out.count - outOffset }

    func resetFields() {
        block.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
        headerBytes = 0
        headerCount = 0
    }

    /// Appends `name: value\r\n` to the synthetic head bytes and records its ranges.
    func appendField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        if fields.isEmpty {
            // One allocation for a usual response head or trailer block (as `H2Stream` does for requests), instead of
            // the arrays doubling from empty: ~8 reallocations per gRPC response head and its trailers.
            block.reserveCapacity(max(512, name.count + value.count + 4))
            fields.reserveCapacity(12)
        }
        let nameStart = block.count
        block.appendBytes(name)
        let nameEnd = block.count
        block.append(UInt8(ascii: ":"))
        block.append(UInt8(ascii: " "))
        let valueStart = block.count
        block.appendBytes(value)
        let valueEnd = block.count
        block.append(13)
        block.append(10)
        fields.append(HTTPHeaderField(
            nameStart: Int32(clamping: nameStart), nameEnd: Int32(clamping: nameEnd),
            valueStart: Int32(clamping: valueStart), valueEnd: Int32(clamping: valueEnd)))
    }

    /// The collected fields, handed over (the stream's buffers start empty again).
    func takeHeaders() -> HTTPHeaders {
        let headers = HTTPHeaders(bytes: block, fields: fields)
        block = []
        fields = []
        headerBytes = 0
        headerCount = 0
        return headers
    }
}
