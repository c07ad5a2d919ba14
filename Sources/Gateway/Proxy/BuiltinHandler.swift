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
    /// The client's `ClientAddressKey` (the peer, or the last `X-Forwarded-For` hop when the peer is a trusted proxy).
    let client: String
    /// The request-target as sent, the listener's scheme and whether the peer is a trusted proxy: the issuer's DPoP
    /// check names the exchange's URI by the rule of SPEC §4.4.
    var target = ""
    var scheme = "http"
    var peerTrusted = false
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

/// Why the exchange refuses a built-in request before its handler sees the body.
enum BuiltinRefusal {
    /// The body is (or is declared) over `maxBodyBytes`: 413.
    case bodyTooLarge
    /// The process's budget for built-in request bodies (`BuiltinBodyBudget`) is spent: 503 with `Retry-After`.
    case bodyBudgetSpent
}

/// Request bodies of built-in handlers are buffered whole (they are small JSON documents), so their sum is bounded
/// process-wide: a crowd of slow clients each sending most of a 64 KiB body cannot pin more than this.
enum BuiltinBodyBudget {
    static let limit = 32 << 20
}

/// A handler mounted at a path prefix.
protocol BuiltinHandler: AnyObject {
    /// The route name used in logs and metrics (`route` label), e.g. `issuer`.
    var name: String { get }
    /// Largest request body accepted; a larger one is refused with 413 before `handle` runs.
    var maxBodyBytes: Int { get }
    /// True when this handler answers `path` (the normalised path).
    func matches(_ path: Substring) -> Bool
    /// A refusal decided from the head alone, before any body byte is read (the issuer's rate limits); nil to go on.
    /// `declaredBodyBytes` is the `Content-Length`, or 0. Called on the loop's thread.
    func refuseEarly(method: String, path: String, declaredBodyBytes: Int, client: String) -> BuiltinResponse?
    /// Answers one request. Called on the event loop's thread; `respond` must be called exactly once, on that
    /// same thread (a handler that works elsewhere hops back with the loop's `execute`).
    func handle(_ request: BuiltinRequest, respond: @escaping (BuiltinResponse) -> Void)
    /// The answer to a refusal of the exchange's own; nil for the gateway's own 413 `body_too_large` or 503
    /// `overloaded`.
    func answer(_ refusal: BuiltinRefusal) -> BuiltinResponse?
}

extension BuiltinHandler {
    func refuseEarly(method: String, path: String, declaredBodyBytes: Int, client: String) -> BuiltinResponse? { nil }
    /// Default: the gateway's own answers (the issuer answers in its Google-style error shape instead).
    func answer(_ refusal: BuiltinRefusal) -> BuiltinResponse? { nil }
}
