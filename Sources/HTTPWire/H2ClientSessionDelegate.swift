/// How an upstream stream of an `H2ClientSession` ended before its response was complete.
public enum H2StreamFailure: Hashable, Sendable {
    /// The server did not process the stream (RST_STREAM(REFUSED_STREAM), or a GOAWAY whose last stream id is lower):
    /// the request may be sent again on another connection whatever its method (RFC 9113 §8.7).
    case refused
    /// The server reset the stream with this code.
    case reset(H2ErrorCode)
    /// The response broke the rules (RFC 9113 §8.1.1, §8.3.2) or a limit (`H2Limits` header bounds): the session reset
    /// the stream with PROTOCOL_ERROR.
    case malformed
    /// The connection ended (EOF, a connection error, `close()`).
    case connectionClosed
}

/// Events of an `H2ClientSession`, delivered synchronously from inside `receive(_:)` or `send(...)`.
///
/// From inside a callback the delegate may call the session's submit-side methods (`submitRequest`, `sendData`,
/// `sendTrailers`, `resetStream`, `consume`), never `receive` or `send`, and it must not release the session. Byte
/// buffers passed in are valid only during the call.
///
/// Stream lifecycle: every stream `submitRequest` returned ends with exactly one `didCompleteStream` (the response was
/// received whole) or `didFailStream` (anything else), unless the delegate reset it itself (`resetStream`: no event).
public protocol H2ClientSessionDelegate: AnyObject {
    /// The final response head of `streamID` (1xx interim heads are skipped). `headers`: the regular fields as
    /// `name: value\r\n` lines, names lower-case, in arrival order. `endStream`: no body and no trailers follow (then
    /// `didCompleteStream` follows at once).
    func h2(_ session: H2ClientSession, didReceiveResponse streamID: Int32, status: Int, headers: HTTPHeaders,
            endStream: Bool)
    /// Response body bytes. They count against the stream's receive window until `consume(streamID:bytes:)`.
    func h2(_ session: H2ClientSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The response's trailer fields (a trailing HEADERS frame, RFC 9113 §8.1); `didCompleteStream` follows.
    func h2(_ session: H2ClientSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders)
    /// The response of `streamID` is complete.
    func h2(_ session: H2ClientSession, didCompleteStream streamID: Int32)
    /// `streamID` ended before its response was complete.
    func h2(_ session: H2ClientSession, didFailStream streamID: Int32, _ failure: H2StreamFailure)
    /// The server sent GOAWAY: no new stream may be opened; streams up to `lastStreamID` may still complete (those
    /// above get `didFailStream(.refused)`).
    func h2(_ session: H2ClientSession, didReceiveGoAway errorCode: H2ErrorCode, lastStreamID: Int32)
    /// The request bytes buffered for `streamID` dropped below `H2Limits.outputLowWatermark` after having been at or
    /// above it: more request body may be queued. Delivered at the end of `send(...)`.
    func h2(_ session: H2ClientSession, didDrainOutput streamID: Int32)
    /// The server's SETTINGS arrived (e.g. a new `remoteMaxConcurrentStreams`).
    func h2DidReceiveSettings(_ session: H2ClientSession)
}

extension H2ClientSessionDelegate {
    /// Default: nothing.
    public func h2(_ session: H2ClientSession, didReceiveGoAway errorCode: H2ErrorCode, lastStreamID: Int32) {}
    /// Default: nothing.
    public func h2(_ session: H2ClientSession, didDrainOutput streamID: Int32) {}
    /// Default: nothing.
    public func h2DidReceiveSettings(_ session: H2ClientSession) {}
}
