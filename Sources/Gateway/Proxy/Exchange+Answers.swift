import ProxyCore
import HTTPWire

/// The answers the exchange writes itself (docs/behaviour.md JSON errors, built-in responses; on a gRPC call its
/// errors in gRPC form, `GRPCStatus`): the `answer` event of the machine, and the bytes it writes.
extension Exchange {
    /// The request body's framing is broken (HTTP/1.1 chunked syntax, or too large): answered and closed.
    func refuseBody(_ error: HTTPParseError) {
        respondError(status: error.status, code: error.status == 413 ? "body_too_large" : "bad_request",
                     reason: error.reason, close: true)
    }

    // MARK: answers of our own

    struct PendingAnswer {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
        /// A gRPC call's error, with its `grpc-status`: `headers` are its Trailers-Only fields, written with HTTP
        /// status 200 and nothing else (`status`, the same answer's status on plain HTTP, is what the log line and
        /// metrics record).
        var grpcStatus: Int? = nil
        /// A gRPC call's trailers (`grpc-status`, `grpc-message`) when the answer comes after its response started (its
        /// `grpc-timeout` passed): the call ends with them after what was relayed, not with a reset. Nil for every
        /// other answer, which then cuts the response.
        var trailersOnceStarted: [(String, String)]? = nil
    }

    func errorAnswer(status: Int, code: String, reason: String, retryAfter: Int? = nil,
                     dpopChallenge: Bool = false) -> PendingAnswer {
        // Refused before the App Check step (malformed, too large, timed out): the log line's `reason` says why;
        // a plain 404 (no route) has none.
        if !appCheckDecided && appCheck.reason == nil && !(status == 404 && route == nil) { appCheck.reason = reason }
        if grpc != nil {
            return PendingAnswer(status: status, headers: GRPCStatus.fields(
                httpStatus: status, code: code, reason: reason, retryAfter: retryAfter, dpopChallenge: dpopChallenge),
                                 body: [], grpcStatus: GRPCStatus.code(forHTTPStatus: status))
        }
        var headers = [("Content-Type", "application/json")]
        if let retryAfter { headers.append(("Retry-After", String(retryAfter))) }
        if dpopChallenge { headers.append(("WWW-Authenticate", "DPoP error=\"invalid_dpop_proof\"")) }
        return PendingAnswer(status: status, headers: headers,
                             body: Array(ErrorResponse.body(code: code, reason: reason, requestId: requestId).utf8))
    }

    /// An error of the gateway's own (docs/behaviour.md JSON body; on a gRPC call, Trailers-Only). After part of a response went out, the
    /// response is cut instead. `close`: the connection closes after it even when the request body was read whole.
    func respondError(status: Int, code: String, reason: String, close: Bool, retryAfter: Int? = nil,
                      dpopChallenge: Bool = false) {
        guard !machine.isDone else { return }
        answer(errorAnswer(status: status, code: code, reason: reason, retryAfter: retryAfter,
                           dpopChallenge: dpopChallenge), close: close)
    }

    /// The `answer` event with the answer it would write: written, or (after a response head) the response is cut.
    func answer(_ answer: PendingAnswer, close: Bool) {
        perform(machine.answer(answer, close: close))
    }

    /// The `answer` action (and the machine's own answers): any upstream channel was abandoned before.
    func writeAnswer(_ answer: PendingAnswer, close: Bool) {
        status = answer.status
        if let code = answer.grpcStatus {
            grpc?.status = code
            responder?.respondTrailersOnly(answer.headers, exchange: self)
        } else {
            responder?.respondComplete(status: answer.status, headers: answer.headers, body: answer.body,
                                       close: close, exchange: self)
        }
        finish()
    }
}
