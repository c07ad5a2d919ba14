import HTTPWire

/// A request the gateway answers itself (the issuer's API and key set, docs/issuer.md), through the same exchange
/// as a proxied one: limits, request ids, the access log line and metrics apply the same way on HTTP/1.1 and
/// HTTP/2. Built-in handlers are matched on the normalised path before routes; the App Check step does not run
/// for them (they are where tokens come from).
struct BuiltinRequest {
    /// The request method, case preserved.
    let method: String
    /// The normalised path (no query).
    let path: String
    let headers: HTTPHeaders
    /// The whole body, at most the handler's `maxBodyBytes` (more is refused with 413 before the handler runs).
    let body: [UInt8]
    let requestId: String
}

/// What a built-in handler answers. `Content-Length` and `X-Request-Id` are added by the exchange.
struct BuiltinResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]
    /// Fields of a log line of the handler's own, written after the request's access-log line with the same
    /// `request_id` (the issuer's `app_id`, `method`, `result` and `rule`); none when empty. Never a secret.
    var logFields: [(String, String)] = []
}

/// A handler mounted at a path prefix.
protocol BuiltinHandler: AnyObject {
    /// The route name used in logs and metrics (`route` label), e.g. `issuer`.
    var name: String { get }
    /// Largest request body accepted; a larger one is refused with 413 before `handle` runs.
    var maxBodyBytes: Int { get }
    /// True when this handler answers `path` (the normalised path).
    func matches(_ path: Substring) -> Bool
    /// Answers one request. Called on the event loop's thread; `respond` must be called exactly once, on that
    /// same thread (a handler that works elsewhere hops back with the loop's `execute`).
    func handle(_ request: BuiltinRequest, respond: @escaping (BuiltinResponse) -> Void)
    /// The answer to a body over `maxBodyBytes`; nil for the gateway's own 413 (`body_too_large`).
    func bodyTooLarge() -> BuiltinResponse?
}

extension BuiltinHandler {
    /// Default: the gateway's own 413 (the issuer answers in its Google-style error shape instead).
    func bodyTooLarge() -> BuiltinResponse? { nil }
}
