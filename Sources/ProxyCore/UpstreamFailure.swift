/// How talking to an upstream failed; the raw value is the `kind` label of
/// `gateway_upstream_errors_total` and the `reason` of the 502/504 answer.
public enum UpstreamFailure: String, Error, Sendable {
    case connectRefused = "connect_failed"
    case connectTimeout = "connect_timeout"
    case reset = "connection_reset"
    /// A pooled connection closed before any byte of the response: retried once when safe.
    case staleConnection = "stale_connection"
    case responseTimeout = "response_timeout"
    /// A stream past its response head moved no byte either way for the route's `stream_idle_timeout`.
    case streamIdleTimeout = "stream_idle_timeout"
    case badResponse = "bad_response"
    /// The TLS handshake with an `https://` upstream failed (untrusted chain, wrong name, protocol).
    case tlsFailed = "tls_failed"
    /// An `h2` upstream over `https://` whose TLS handshake did not select `h2` by ALPN (502).
    case notH2 = "alpn_not_h2"
    /// No idle connection and new connects are past the upstream's `max_connects_per_second` (503, never tried).
    case connectRateLimited = "connect_rate_limited"
    /// The client address already holds its share of this upstream (`max_upstream_requests_per_address`), or has
    /// another request in progress there while the upstream's connect budget is down to its last half (503, never
    /// tried).
    case addressBusy = "address_busy"

    public var isRetryable: Bool { self == .staleConnection }
}
