import ProxyCore

/// What a gRPC call adds to its exchange (SPEC §6.1): no check of its own (admission and the App Check step are every
/// request's), only the refusal of an upstream that cannot carry it and the end of its `grpc-timeout`. Its answers
/// take gRPC's form in `errorAnswer` (Exchange+Answers.swift).
extension Exchange {
    /// A gRPC call routed to an `http1` upstream cannot work there (no trailers, no HTTP/2 streams): 14 UNAVAILABLE,
    /// reason `upstream_not_h2`, before the App Check step (no token is spent, no key work done for a call that can
    /// never be carried) and never forwarded. True when refused.
    func refuseGRPCWithoutH2(_ route: CompiledRoute) -> Bool {
        guard grpc != nil, !route.upstreamIsH2 else { return false }
        respondError(status: 502, code: "upstream_unavailable", reason: "upstream_not_h2", close: false)
        return true
    }

    /// The call's `grpc-timeout` passed before the upstream's trailers: the upstream's stream is reset and the call
    /// ends with 4 DEADLINE_EXCEEDED: Trailers-Only when nothing of a response went out yet (logged 504), else a
    /// trailing HEADERS frame after what was relayed (the responder's `endGRPCCall`; logged with the upstream's
    /// status).
    func grpcDeadlinePassed() {
        guard grpc != nil, !machine.isDone else { return }
        var deadline = errorAnswer(status: 504, code: "deadline_exceeded", reason: "grpc_timeout")
        deadline.trailersOnceStarted = [
            ("grpc-status", String(GRPCStatus.deadlineExceeded)),
            ("grpc-message", GRPCStatus.message(code: "deadline_exceeded", reason: "grpc_timeout")),
        ]
        answer(deadline, close: false)
    }
}
