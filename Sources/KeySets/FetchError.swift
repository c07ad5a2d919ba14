/// Why one `BlockingHTTPClient.get` failed. Each case carries enough text for a log line.
enum FetchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL could not be understood (the text says why).
    case invalidURL(String)
    /// Not `http://`, `https://` or `file://`.
    case unsupportedScheme(String)
    /// The host name did not resolve.
    case resolve(String)
    /// Every address refused the connection (`ECONNREFUSED`).
    case connectionRefused(String)
    /// Connecting failed for another reason (unreachable network, reset, …).
    case connect(String)
    /// The total deadline passed; the text names the phase (`connect`, `tls handshake`, `read`, `write`).
    case timeout(String)
    /// The server's certificate did not verify: OpenSSL's reason (`unable to get local issuer certificate`,
    /// `hostname mismatch`, …).
    case tlsVerify(String)
    /// Another TLS failure (protocol version, handshake alert, setup), with OpenSSL's reason.
    case tls(String)
    /// A read or write on an established connection failed.
    case io(String)
    /// The response head or chunked body was malformed, or the connection closed early.
    case malformedResponse(String)
    /// The final status was not 200.
    case status(Int)
    /// The body exceeded the limit (the limit in bytes).
    case bodyTooLarge(Int)
    /// A `file://` URL could not be read.
    case file(String)

    var description: String {
        switch self {
        case .invalidURL(let why): "invalid URL: \(why)"
        case .unsupportedScheme(let scheme): "unsupported URL scheme \(scheme) (http, https or file)"
        case .resolve(let why): why
        case .connectionRefused(let address): "connection refused by \(address)"
        case .connect(let why): "connect failed: \(why)"
        case .timeout(let phase): "timed out during \(phase)"
        case .tlsVerify(let why): "TLS certificate verification failed: \(why)"
        case .tls(let why): "TLS failure: \(why)"
        case .io(let why): "I/O error: \(why)"
        case .malformedResponse(let why): "malformed response: \(why)"
        case .status(let code): "HTTP status \(code)"
        case .bodyTooLarge(let limit): "response body larger than \(limit) bytes"
        case .file(let why): why
        }
    }
}
