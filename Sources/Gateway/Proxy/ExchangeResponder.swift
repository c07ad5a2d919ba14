import HTTPWire

/// The client side of one `Exchange`: an HTTP/1.1 connection (one exchange at a time) or an HTTP/2 stream. The
/// exchange decides everything a request means (admission, App Check, the handler, the upstream, the retry, errors,
/// logs and metrics); the responder only turns its output into bytes of its protocol. All calls happen on the loop.
protocol ExchangeResponder: AnyObject {
    /// The client's address as text (for `X-Forwarded-For`).
    var peerIP: String { get }
    /// True when the client is a trusted proxy (its `X-Forwarded-*` are kept).
    var peerTrusted: Bool { get }
    /// `http` or `https` (for `X-Forwarded-Proto`).
    var scheme: String { get }
    /// Called once the request is admitted, before anything reaches the upstream: a last look at body bytes
    /// already buffered (HTTP/1.1 checks a buffered chunked body, so a malformed first chunk is refused without a
    /// word to the upstream). Return false after refusing through `exchange.refuseBody`.
    func checkBufferedBody(exchange: Exchange) -> Bool
    /// The exchange now wants the request body (`receiveBody`, then `receiveEnd`).
    func requestBodyWanted(exchange: Exchange)
    /// The upstream's final response head. Write it through `ResponseHeaderFilter` (hop-by-hop and `Connection`-listed
    /// fields and the upstream's `X-Request-Id` removed) with `X-Request-Id: exchange.requestId`.
    func respondHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming, exchange: Exchange)
    /// Response body bytes; false when the client's buffer is full (the upstream stops reading until
    /// `exchange.clientDrained()`).
    func respondBody(_ data: UnsafeRawBufferPointer, exchange: Exchange) -> Bool
    /// Whether body bytes may be handed over now (checked right after `respondHead`, before the first body byte is
    /// read from the upstream). HTTP/2 says no while the stream's, the connection's or the process's response
    /// buffers are at their limits.
    func acceptsResponseBody(exchange: Exchange) -> Bool
    /// The upstream's response is complete.
    func respondEnd(exchange: Exchange)
    /// A complete answer of the gateway's own (an error, or a built-in handler's response), nothing of a response
    /// having been sent. `Content-Length` (of `body`) and `X-Request-Id` are added here; the body is not sent for
    /// `HEAD` (`exchange.isHead`). `close`: the
    /// request body was not (or not wholly) read, so an HTTP/1.1 connection must close after it.
    func respondComplete(status: Int, headers: [(String, String)], body: [UInt8], close: Bool, exchange: Exchange)
    /// `100 Continue` is owed now (the request was admitted and its body is wanted).
    func sendContinue(exchange: Exchange)
    /// Part of the response went out and it cannot be completed: cut the stream (or the connection).
    func abortResponse(exchange: Exchange)
    /// Request body bytes the exchange held back (`receiveBody` returned false) have been taken by the upstream.
    func requestBodyDrained(exchange: Exchange)
    /// The exchange is over and has been logged; the responder may take the next request.
    func exchangeFinished(_ exchange: Exchange)
}
