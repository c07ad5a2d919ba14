/// How the body of a response is delimited (RFC 9112 §6.3), from `HTTPResponseHead.framing(requestMethod:)`.
public enum ResponseBodyFraming: Hashable, Sendable {
    /// No body: a response to `HEAD`, any 1xx, 204 or 304 (RFC 9112 §6.3 item 1), or a 2xx to `CONNECT`
    /// (item 2: the connection becomes a tunnel; the caller decides what to do with it).
    case none
    /// `Content-Length: n` (RFC 9112 §6.3 item 6).
    case contentLength(Int64)
    /// `Transfer-Encoding: chunked` (RFC 9112 §6.3 item 4): decode with `ChunkedDecoder`.
    case chunked
    /// Neither header: the body extends until the upstream closes the connection (RFC 9112 §6.3 item 8).
    /// Such a connection can never be reused.
    case untilClose
}
