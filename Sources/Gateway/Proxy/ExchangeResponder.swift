import ProxyCore
import EventLoop
import HTTPWire

/// The client side of one `Exchange`: an HTTP/1.1 connection (one exchange at a time) or an HTTP/2 stream. The
/// exchange decides everything a request means (admission, App Check, the handler, the upstream, the retry, errors,
/// logs and metrics) and when input flows; the responder only turns its output into bytes of its protocol, and
/// pauses and resumes the client's input when told. All calls happen on the loop.
///
/// Input: the adapter feeds `Exchange.receiveBody` (whose `false` pauses its input), `receiveEnd`, `refuseBody`,
/// `bodyTimedOut` and `cancel`; it pauses its input from the head on, until `resumeInput`.
protocol ExchangeResponder: AnyObject {
    /// The client's address as text (for `X-Forwarded-For`).
    var peerIP: String { get }
    /// True when the client is a trusted proxy (its `X-Forwarded-*` are kept).
    var peerTrusted: Bool { get }
    /// The peer's `ConnectionAddressKey` (IPv4 /32, IPv6 /64), for `max_upstream_requests_per_address`.
    var peerKey: ConnectionAddressKey { get }
    /// `http` or `https` (for `X-Forwarded-Proto`).
    var scheme: String { get }
    /// A look at request body bytes the adapter already holds but has not handed over, asked once the request is
    /// admitted and before anything reaches the upstream (HTTP/1.1 checks a buffered chunked body, so a malformed
    /// or oversized first chunk is refused without a word to the upstream). Nil when there is nothing wrong.
    func bufferedBodyProblem(maxBodyBytes: Int64) -> HTTPParseError?
    /// `100 Continue` is owed now (the request was admitted and its body is wanted).
    func sendContinue(exchange: Exchange)
    /// The client's input flows again: the body is wanted (then `receiveBody`, `receiveEnd`), or the bytes it held
    /// back (`receiveBody` returned false) have been taken.
    func resumeInput(exchange: Exchange)
    /// The upstream's final response head. Write it through `ResponseHeaderFilter` (hop-by-hop and `Connection`-listed
    /// fields and the upstream's `X-Request-Id` removed) with `X-Request-Id: exchange.requestId`. Returns whether
    /// body bytes may follow now (HTTP/2 says no while the stream's, the connection's or the process's response
    /// buffers are at their limits; the upstream then waits for `exchange.clientDrained()`).
    func writeHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming, exchange: Exchange) -> Bool
    /// Response body bytes; false when the client's buffer is full (the upstream stops reading until
    /// `exchange.clientDrained()`).
    func writePart(_ data: UnsafeRawBufferPointer, exchange: Exchange) -> Bool
    /// The upstream's response is complete. `requestComplete`: the request body was read whole (else an HTTP/1.1
    /// connection closes after the response: the rest of the body must not be read as a request).
    func writeEnd(requestComplete: Bool, exchange: Exchange)
    /// A complete answer of the gateway's own (an error, or a built-in handler's response), nothing of a response
    /// having been sent. `Content-Length` (of `body`) and `X-Request-Id` are added here; the body is not sent for
    /// `HEAD` (`exchange.isHead`). `close`: the request body was not (or not wholly) read, or the request was
    /// malformed, so an HTTP/1.1 connection must close after it.
    func respondComplete(status: Int, headers: [(String, String)], body: [UInt8], close: Bool, exchange: Exchange)
    /// A gRPC call's own answer (SPEC §6.1), nothing of a response having been sent: HTTP status 200 and `fields`
    /// (`content-type`, `grpc-status`, `grpc-message`, …) plus `x-request-id`, in one HEADERS frame that ends the
    /// stream ("Trailers-Only"). Only HTTP/2 carries gRPC; the default (for the HTTP/1.1 adapter, which never sees a
    /// gRPC call) is a `200` with those fields and no body.
    func respondTrailersOnly(_ fields: [(String, String)], exchange: Exchange)
    /// A gRPC call whose response has started ends now, with `trailers` (`grpc-status`, `grpc-message`) after what
    /// went out, instead of being cut. The default cuts it (`abortResponse`).
    func endGRPCCall(_ trailers: [(String, String)], exchange: Exchange)
    /// Part of the response went out and it cannot be completed: cut the stream (or the connection).
    func abortResponse(exchange: Exchange)
    /// The exchange is over and has been logged; the responder may take the next request.
    func exchangeFinished(_ exchange: Exchange)
}

extension ExchangeResponder {
    func respondTrailersOnly(_ fields: [(String, String)], exchange: Exchange) {
        respondComplete(status: 200, headers: fields, body: [], close: false, exchange: exchange)
    }

    func endGRPCCall(_ trailers: [(String, String)], exchange: Exchange) { abortResponse(exchange: exchange) }
}
