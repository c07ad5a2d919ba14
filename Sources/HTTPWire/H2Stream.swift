/// Per-stream state of an `H2ServerSession` (request being assembled, response being sent).
final class H2Stream: H2OutgoingBody {
    let id: Int32

    // Request head being assembled from the header callbacks. The pseudo-fields' values are ranges in the session's
    // `pseudoBytes` (one reused buffer: a header block is never interleaved with another stream's, RFC 9113 §4.3).
    var method: Range<Int32>?
    var path: Range<Int32>?
    var scheme: Range<Int32>?
    var authority: Range<Int32>?
    var hostValue: [UInt8]?
    var cookie: [UInt8]?
    var contentLength: Int64?
    var expectContinue = false
    var block: [UInt8] = []
    var fields: [HTTPHeaderField] = []
    var headerBytes = 0
    var headerCount = 0

    /// The head went over a header limit; it is not delivered, the delegate was (or will be) told.
    var exceeded = false
    /// We reset the stream (malformed, CONNECT, …); everything more is ignored.
    var rejected = false
    /// The delegate got `didReceiveRequest` or `streamExceededHeaderLimit`.
    var announced = false
    /// The client's side is closed (END_STREAM received).
    var remoteEnded = false
    /// Body bytes given to the delegate and not yet `consume`d.
    var unconsumed = 0
    /// DATA payload bytes received on this stream, held against `contentLength` (RFC 9113 §8.1.1).
    var receivedBodyBytes: Int64 = 0
    /// The request's trailer section being read (`H2ServerSession.onTrailer`).
    var trailerBlock: [UInt8] = []
    var trailerFields: [HTTPHeaderField] = []
    var trailerBytes = 0
    var trailersDropped = false

    /// The request trailers read, handed over once.
    func takeRequestTrailers() -> HTTPHeaders? {
        guard !trailerFields.isEmpty, !trailersDropped else { return nil }
        defer {
            trailerBlock = []
            trailerFields = []
        }
        return HTTPHeaders(validatedBytes: trailerBlock, fields: trailerFields)
    }

    // Response.
    var headSent = false
    var hasBody = false
    var endQueued = false
    var deferred = false
    var responseComplete = false
    var aboveLowWatermark = false
    var out: [UInt8] = []
    var outOffset = 0
    /// Response trailers, sent after the last DATA instead of END_STREAM on it.
    var trailers: H2HeaderList?

    init(id: Int32) { self.id = id }

    var bufferedBytes: Int { out.count - outOffset }

    func dropHeadState() {
        block = []
        fields = []
        cookie = nil
        method = nil
        path = nil
        scheme = nil
        authority = nil
        hostValue = nil
    }

    /// Appends `name: value\r\n` to the synthetic head bytes and records its ranges.
    func appendField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        if fields.isEmpty {
            // One allocation for a typical request's fields (an App Check token alone is about a kilobyte, and its
            // line with a few other fields went past 1 KiB: a second allocation and a copy per request), instead of
            // growing and copying as they arrive.
            block.reserveCapacity(max(2048, name.count + value.count + 4))
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
}

/// A token bucket: `capacity` events at once, refilled at `capacity` per `windowNanoseconds`.
struct H2TokenBucket {
    let capacity: Double
    let perNanosecond: Double
    var tokens: Double
    var last: UInt64

    init(capacity: Int, windowSeconds: Int, now: UInt64) {
        self.capacity = Double(capacity)
        self.perNanosecond = Double(capacity) / (Double(windowSeconds) * 1e9)
        self.tokens = Double(capacity)
        self.last = now
    }

    /// Takes one token; `false` when the bucket is empty (the limit is exceeded).
    mutating func take(now: UInt64) -> Bool {
        if now > last {
            tokens = min(capacity, tokens + Double(now - last) * perNanosecond)
            last = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
