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

    /// A new header block starts (or the one being read is dropped): its counts start again (the session's block
    /// buffer holds its fields, `H2ClientSession.appendField`).
    func resetFields() {
        headerBytes = 0
        headerCount = 0
    }
}
