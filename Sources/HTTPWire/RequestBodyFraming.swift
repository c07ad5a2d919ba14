/// How the body of a request is delimited (RFC 9112 §6.3 items 3–7, seen from a server).
public enum RequestBodyFraming: Hashable, Sendable {
    /// Neither `Content-Length` nor `Transfer-Encoding`: the request has no body (RFC 9112 §6.3 item 7).
    case none
    /// `Content-Length: n` (RFC 9110 §8.6). `n` may be 0.
    case contentLength(Int64)
    /// `Transfer-Encoding: chunked` (RFC 9112 §7.1): decode with `ChunkedDecoder`.
    case chunked
}
