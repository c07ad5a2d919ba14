/// A tunnel's relay as the connection machines carry it in their `tunnel` state: Gateway's `TunnelRelay`, which moves
/// bytes between the client's and the upstream's sockets. The machines cannot name that class (it lives in the room
/// above), and making them generic over it cost every request: the generic machines were not specialised across the
/// module boundary (callgrind: metadata look-ups and value-witness copies per event), so they hold this existential.
public protocol TunnelEndpoint: AnyObject {
    /// Readiness of the client's socket (epoll event bits).
    func clientEvent(_ events: UInt32)
    /// Readiness of the upstream's socket (epoll event bits).
    func upstreamEvent(_ events: UInt32)
    /// Ends both halves of the tunnel with `outcome` (logged and counted once).
    func finish(_ outcome: TunnelState.Outcome)
}

/// The relay inside a machine's state, compared by identity so the states stay `Equatable` for the table tests.
public struct TunnelHandle: Equatable {
    public let endpoint: any TunnelEndpoint

    public init(_ endpoint: any TunnelEndpoint) { self.endpoint = endpoint }

    public static func == (a: TunnelHandle, b: TunnelHandle) -> Bool { a.endpoint === b.endpoint }
}
