/// Events of an `H2ServerSession`, delivered synchronously from inside `receive(_:)` or `send(...)` on the
/// session's thread.
///
/// From inside a callback the delegate may call the session's submit-side methods (`sendResponseHead`,
/// `sendData`, `resetStream`, `consume`, `goAway`), but never `receive` or `send`, and it must not release
/// the session. Byte buffers passed in are only valid during the call.
///
/// Stream lifecycle: every stream the delegate heard of (`didReceiveRequest` or
/// `streamExceededHeaderLimit`) ends with exactly one `didCloseStream` (our response was completely sent)
/// or `didResetStream` (anything else: the client reset it, we or the gateway reset it, the session
/// ended) — the place to free per-stream state. Streams refused by the session itself (malformed request,
/// CONNECT, over the concurrency limit) are never reported.
public protocol H2SessionDelegate: AnyObject {
    /// A complete, validated request head (RFC 9113 §8.3) arrived on `streamID`. `endStream` true means
    /// the request has no body (then no `didEndStream` follows). See `H2ServerSession` for how the head is
    /// built.
    func h2(_ session: H2ServerSession, didReceiveRequest streamID: Int32, head: HTTPRequestHead, endStream: Bool)
    /// Request body bytes of `streamID`. Call `consume(streamID:bytes:)` once they have been forwarded:
    /// until then they count against the client's flow-control windows.
    func h2(_ session: H2ServerSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The request body of `streamID` is complete (END_STREAM on DATA or on trailers).
    func h2(_ session: H2ServerSession, didEndStream streamID: Int32)
    /// The request's trailer fields (a trailing HEADERS frame, RFC 9113 §8.1), just before `didEndStream`: names
    /// lower-case, as `name: value\r\n` lines; dropped whole when over the head's limits or with an invalid field.
    func h2(_ session: H2ServerSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders)
    /// `streamID` ended before our response was completely sent: client RST_STREAM, a stream error
    /// detected by nghttp2 (e.g. content-length mismatch → `PROTOCOL_ERROR`), our own `resetStream`, or
    /// the end of the connection. Stop working on it; nothing more can be sent on it.
    func h2(_ session: H2ServerSession, didResetStream streamID: Int32, errorCode: H2ErrorCode)
    /// `streamID` is closed after our response was completely sent.
    func h2(_ session: H2ServerSession, didCloseStream streamID: Int32)
    /// The client sent GOAWAY: no new streams will come; streams ≤ `lastStreamID` may still complete.
    func h2(_ session: H2ServerSession, didReceiveGoAway errorCode: H2ErrorCode, lastStreamID: Int32)
    /// The request head of `streamID` exceeded `maxHeaderListBytes` or `maxHeaders`. It is not delivered
    /// and its body (if any) is discarded. Answer `431` with `sendResponseHead(..., endStream: true)` (the
    /// session then resets the rest of the request with `NO_ERROR`) or `resetStream`.
    func h2(_ session: H2ServerSession, streamExceededHeaderLimit streamID: Int32)
    /// The response bytes buffered for `streamID` dropped below `H2Limits.outputLowWatermark` after having
    /// been at or above it: resume reading its upstream. Delivered at the end of `send(...)`.
    func h2(_ session: H2ServerSession, didDrainOutput streamID: Int32)
}

extension H2SessionDelegate {
    /// Default: the trailers are dropped.
    public func h2(_ session: H2ServerSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders) {}
    /// Default: nothing.
    public func h2(_ session: H2ServerSession, didCloseStream streamID: Int32) {}
    /// Default: nothing.
    public func h2(_ session: H2ServerSession, didReceiveGoAway errorCode: H2ErrorCode, lastStreamID: Int32) {}
    /// Default: nothing.
    public func h2(_ session: H2ServerSession, didDrainOutput streamID: Int32) {}
}
