/// What the exchange's driver and its adapters read of the machine: derived from the state, never stored beside it.
extension ExchangeStateMachine {
    public var isDone: Bool { if case .done = state { return true } else { return false } }

    public var isAdmitting: Bool { if case .admitting = state { return true } else { return false } }

    /// The channel that carries the request, while one does.
    public var upstream: Upstream? {
        switch state {
        case .forwarding(_, _, let up), .streamingResponse(_, let up): return up
        default: return nil
        }
    }

    /// The exchange wants no more request body (it is complete, there was none, or the exchange is over).
    public var requestComplete: Bool {
        switch state {
        case .admitting(let body, _), .connecting(let body, _), .forwarding(let body, _, _), .streamingResponse(let body, _):
            return body == .complete
        case .builtinBody: return false
        case .refusing, .builtinWaiting, .tunnel, .done: return true
        }
    }

    /// A response head (the upstream's or the gateway's own) has gone to the client.
    public var responseStarted: Bool {
        switch state {
        case .streamingResponse, .tunnel, .done(.completed), .done(.answered), .done(.cut): return true
        default: return false
        }
    }

    /// The ending, once done.
    public var ending: Ending? { if case .done(let e) = state { return e } else { return nil } }

    /// The client's body is held back (the upstream's send buffer is past `highWater`) until `upstreamDrained`.
    public var inputHeld: Bool {
        switch state {
        case .forwarding(.streaming(held: true), _, _), .streamingResponse(.streaming(held: true), _): return true
        default: return false
        }
    }
}
