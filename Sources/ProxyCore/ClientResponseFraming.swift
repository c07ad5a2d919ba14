/// How the response body is framed towards an HTTP/1.1 client.
public enum ClientResponseFraming {
    case pending
    case none
    case length(remaining: Int64)
    case chunked
    /// HTTP/1.0 client and a response of unknown length: the body ends when we close.
    case close
}
