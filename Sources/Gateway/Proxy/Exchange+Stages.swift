/// What `Exchange` records of how far a request got and why it stopped early (the log line's fields).
extension Exchange {
    /// How far the request got with the App Check step.
    enum AppCheckStage {
        /// Answered before the step decided (refused at admission, a built-in handler, a body timeout, the client
        /// gone while the step waited): no App Check outcome is counted, and the log line has none.
        case notReached
        /// The step decided (an `off` route's `skipped` included): `appCheck` is its outcome.
        case decided
    }

    /// Why an exchange is cancelled before it finished.
    enum Cancellation {
        /// The client went away: the end of its byte stream (EOF, a TLS `close_notify`) or a failed read or write.
        case clientClosed
        /// The gateway closed the connection (a timeout cutting a response, a protocol error, shutdown).
        case connectionClosed
    }
}
