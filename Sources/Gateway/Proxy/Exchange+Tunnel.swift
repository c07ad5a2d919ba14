import ProxyCore
import EventLoop
import GatewayConfig
import HTTPWire

/// Where an exchange stands with a WebSocket tunnel (SPEC §6.1). A handshake goes through the same admission and
/// App Check step as every request of its route; only its upstream connection (new, never pooled), the two fields it
/// forwards again and what a `101` does differ. A stream (a response on a route with `stream_idle_timeout`) is no
/// tunnel, but its log line has the bytes too (`stream`).
enum ExchangeTunnel {
    /// An ordinary request.
    case none
    /// A response body on a route with `stream_idle_timeout` (server-sent events, a long poll): the bytes relayed to
    /// the client so far, its log line's `bytes_out`.
    case stream(bytesOut: Int64)
    /// A WebSocket handshake on a `websocket: true` route from an HTTP/1.1 client: forwarded on a new connection
    /// with `Connection: Upgrade` and `Upgrade: websocket`; a tunnel after `101` is closed after `idleTimeout`
    /// (nanoseconds) without a byte either way.
    case requested(idleTimeout: UInt64)
    /// The upstream answered `101`: the relay carries the bytes.
    case open(TunnelRelay)
    /// The tunnel ended; what the log line says of it.
    case ended(bytesIn: Int64, bytesOut: Int64, outcome: TunnelState.Outcome)
}

extension Exchange {
    /// What a `websocket: true` route's request became before its App Check step.
    enum WebSocketPreparation {
        /// Nothing to change.
        case unchanged
        /// The `x-firebase-appcheck.` subprotocol entries were removed (the token moved into `X-Firebase-AppCheck`
        /// when that field was absent): the step reads this head, and it is the one forwarded.
        case rewritten(HTTPRequestHead)
        /// Refused (the rewritten head was over the limits).
        case answered
    }

    /// On a route with `websocket: true`: marks a handshake from an HTTP/1.1 client as one (`tunnel`), and removes
    /// the token subprotocol entries of any request of the route (`WebSocketHandshake.withSubprotocolTokenMoved`).
    func prepareWebSocket(_ head: HTTPRequestHead, route: CompiledRoute) -> WebSocketPreparation {
        // HTTP/2 has no Upgrade (RFC 8441 is not offered): only an HTTP/1.1 connection can become a tunnel.
        if responder is ClientConnection && WebSocketHandshake.isHandshake(head) {
            tunnel = .requested(idleTimeout: route.tunnelIdleTimeoutNS)
        }
        switch WebSocketHandshake.withSubprotocolTokenMoved(head, limits: context.runtime.parserLimits) {
        case .unchanged:
            return .unchanged
        case .rewritten(let rewritten):
            machine.replaceHead(rewritten)
            return .rewritten(rewritten)
        case .tooLarge:
            respondError(status: 431, code: "headers_too_large", reason: "headers_too_large", close: true)
            return .answered
        }
    }

    /// The forwarded handshake keeps what the hop-by-hop rule removed: `Connection: Upgrade` and
    /// `Upgrade: websocket`, before the head's final empty line.
    static func addUpgradeFields(_ out: IOBuffer) {
        let written = Array(out.readable)
        guard written.count >= 4 else { return }
        out.clear()
        written.withUnsafeBytes { out.append(UnsafeRawBufferPointer(rebasing: $0[0..<(written.count - 2)])) }
        out.append(static: WebSocketHandshake.forwardedUpgradeFields)
    }

    /// The upstream answered the handshake `101` with `Upgrade: websocket`: the client gets its `101` and both
    /// connections become the tunnel. False when this exchange asked for no tunnel or is over.
    func upstreamUpgraded(_ head: HTTPResponseHead, connection _: UpstreamConnection) -> Bool {
        guard case .requested = tunnel, responder is ClientConnection, !machine.isDone else { return false }
        perform(machine.upstreamUpgraded(head))
        return true
    }

    /// The `openTunnel` action: `channel` is the handshake's own connection (a new HTTP/1.1 one, asked for by
    /// `tunnel`).
    func openTunnel(_ channel: any UpstreamChannel, head: HTTPResponseHead) {
        guard case .requested(let idle) = tunnel, let client = responder as? ClientConnection,
              let up = channel as? UpstreamConnection else {
            preconditionFailure("Exchange: a tunnel opened without its handshake")
        }
        upstreamEnd = context.loop.now
        status = 101
        leaveUpstreamSlot()
        let relay = TunnelRelay(client: client, upstream: up, exchange: self, idleTimeout: idle, loop: context.loop)
        tunnel = .open(relay)
        responder = nil
        client.enterTunnel(relay, head: head, requestId: id)
        up.enterTunnel(relay)
        relay.start(clientLeftover: client.tunnelLeftover, upstreamLeftover: up.tunnelLeftover)
    }

    /// Writes a part of the response body; on a stream route counts its bytes for the log line (SPEC §6.1).
    @inline(__always)
    func relayPart(_ data: UnsafeRawBufferPointer, to responder: ExchangeResponder) -> Bool {
        switch tunnel {
        case .stream(let n):
            tunnel = .stream(bytesOut: n + Int64(data.count))
        case .none:
            if let route, route.streamIdleTimeoutNS != nil {
                tunnel = .stream(bytesOut: Int64(data.count))
            }
        case .requested, .open, .ended:
            break
        }
        return responder.writePart(data, exchange: self)
    }

    /// The tunnel is over (both sides closed): the exchange's one log line, with the bytes each way.
    func tunnelEnded(_ relay: TunnelRelay) {
        guard case .open = tunnel else { return }
        let s = relay.state
        tunnel = .ended(bytesIn: s.bytesIn, bytesOut: s.bytesOut, outcome: s.outcome ?? .closed)
        perform(machine.tunnelClosed())
    }
}
