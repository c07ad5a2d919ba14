import ProxyCore
import HTTPWire

/// Whoever an upstream exchange answers to: an HTTP/1.1 client connection, or one HTTP/2 stream.
/// Called on the loop thread by `UpstreamConnection`.
protocol UpstreamOwner: AnyObject {
    /// The final response head arrived (1xx are skipped). Returns false when no body bytes are wanted yet (the
    /// client's buffers are full): the upstream then stops reading before the first body byte, until
    /// `UpstreamConnection.clientDrained()`.
    func upstreamResponseHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming) -> Bool
    /// Body bytes; return false to make the upstream stop reading until `UpstreamConnection.clientDrained()`.
    func upstreamResponseBody(_ data: UnsafeRawBufferPointer) -> Bool
    /// The response's trailer fields (an HTTP/2 upstream's trailing HEADERS), just before `upstreamResponseEnd`.
    func upstreamResponseTrailers(_ trailers: HTTPHeaders)
    /// The response is complete.
    func upstreamResponseEnd()
    /// The exchange failed (before or after the head).
    func upstreamFailed(_ kind: UpstreamFailure)
    /// The upstream's send buffer drained below the low-water mark: more request body may be sent.
    func upstreamDrained()
    /// The upstream answered a WebSocket handshake with `101` and `Upgrade: websocket`: the connection becomes a
    /// tunnel (`TunnelRelay`). False when no tunnel can be opened (the upstream connection then fails `bad_response`).
    func upstreamUpgraded(_ head: HTTPResponseHead, connection: UpstreamConnection) -> Bool
}
