import ProxyCore
import EventLoop

/// A request a built-in handler (the issuer) takes, from admission to its answer: the handler, the body read whole
/// within the process's budget, and the client address its limits are charged to (Exchange+Builtin.swift). A class:
/// a routed request carries none of it (`Exchange.builtin` is nil), and a handler's request is rare enough that one
/// allocation is nothing beside its work.
final class BuiltinCall {
    let handler: BuiltinHandler
    /// The client's `ClientAddressKey`, for the handler's limits.
    let client: String
    /// The body so far (handed to the handler whole).
    var body: [UInt8] = []
    /// Bytes of `SharedState.builtinBodyBytes` this request holds (the body's declared or received size).
    var reserved = 0
    /// When the body was asked for, and the timer that holds it to `BuiltinBodyBudget`'s minimum rate.
    var bodyStart: UInt64 = 0
    var rateTimer: LoopTimer?

    init(handler: BuiltinHandler, client: String) {
        self.handler = handler
        self.client = client
    }
}
