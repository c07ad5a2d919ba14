import HTTPWire

/// A request the gateway answers itself (the issuer's API and key set, docs/issuer.md), through the same exchange
/// as a proxied one: limits, request ids, the access log line and metrics apply the same way on HTTP/1.1 and
/// HTTP/2. Built-in handlers are matched on the normalised path before routes; the App Check step does not run
/// for them (they are where tokens come from).
public struct BuiltinRequest {
    /// The request method, case preserved.
    public let method: String
    /// The normalised path (no query).
    public let path: String
    public let headers: HTTPHeaders
    /// The whole body, at most the handler's `maxBodyBytes` (more is refused with 413 before the handler runs).
    public let body: [UInt8]
    public let requestId: String
    /// The client's `ClientAddressKey` (the peer, or the last `X-Forwarded-For` hop when the peer is a trusted proxy).
    public let client: String
    /// The request-target as sent, the listener's scheme and whether the peer is a trusted proxy: the issuer's DPoP
    /// check names the exchange's URI by the rule of SPEC §4.4.
    public var target = ""
    public var scheme = "http"
    public var peerTrusted = false

    public init(method: String, path: String, headers: HTTPHeaders, body: [UInt8], requestId: String, client: String,
                 target: String = "", scheme: String = "http", peerTrusted: Bool = false) {
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
        self.requestId = requestId
        self.client = client
        self.target = target
        self.scheme = scheme
        self.peerTrusted = peerTrusted
    }
}

/// What a built-in handler answers. `Content-Length` and `X-Request-Id` are added by the exchange.
public struct BuiltinResponse {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Fields of a log line of the handler's own, written after the request's access-log line with the same
    /// `request_id` (the issuer's `app_id`, `method`, `result` and `rule`); none when empty. Never a secret.
    public var logFields: [(String, String)] = []

    public init(status: Int, headers: [(String, String)], body: [UInt8], logFields: [(String, String)] = []) {
        self.status = status
        self.headers = headers
        self.body = body
        self.logFields = logFields
    }
}

/// Why the exchange refuses a built-in request before its handler sees the body.
public enum BuiltinRefusal {
    /// The body is (or is declared) over `maxBodyBytes`: 413.
    case bodyTooLarge
    /// The process's budget for built-in request bodies (`BuiltinBodyBudget`) is spent: 503 with `Retry-After`.
    case bodyBudgetSpent
    /// The client address holds its share of that budget (`BuiltinBodyBudget.perAddress`): 429 with `Retry-After`.
    case addressBodyBudgetSpent
}

/// Request bodies of built-in handlers are buffered whole (they are small JSON documents), so their sum is bounded
/// process-wide: a crowd of slow clients each sending most of a 64 KiB body cannot pin more than this.
public enum BuiltinBodyBudget {
    public static let limit = 32 << 20
    /// What one client address (`ClientAddressKey`: an IPv4 address or an IPv6 /64; behind a trusted proxy, the
    /// forwarded client) may hold of `limit`: 2 MiB, 32 bodies of the largest size (64 KiB) or hundreds of real
    /// ones (an App Attest attestation is about 5 KiB), so one address can never hold more than a sixteenth of it
    /// (issue 39: one address with 512 trickling connections held it all).
    public static let perAddress = 2 << 20
    /// A body must keep up on average with `minimumBytesPerSecond` once `rateGraceNS` have passed since it was
    /// asked for: it is answered 408 (reason `body_too_slow`) and its connection closed when it arrives more slowly
    /// (like Apache's `mod_reqtimeout` `body=10,MinRate=1024`). Each byte received pushes the deadline by
    /// 1/`minimumBytesPerSecond` s, so 64 KiB may take 74 s, the 1-byte-per-20-s trickle of issue 39 is closed after
    /// 10 s, and `body_timeout` (a gap between two reads) still applies on its own.
    public static let rateGraceNS: UInt64 = 10_000_000_000
    /// See `rateGraceNS`.
    public static let minimumBytesPerSecond: UInt64 = 1024
}

/// A handler mounted at a path prefix.
public protocol BuiltinHandler: AnyObject {
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
    public func refuseEarly(method: String, path: String, declaredBodyBytes: Int, client: String) -> BuiltinResponse? { nil }
    /// Default: the gateway's own answers (the issuer answers in its Google-style error shape instead).
    public func answer(_ refusal: BuiltinRefusal) -> BuiltinResponse? { nil }
}
