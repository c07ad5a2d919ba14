import EventLoop
import HTTPWire

/// One request/response passing through a client connection (HTTP/1.1 serves them one at a time).
final class Exchange {
    let method: String
    /// The normalised path (never the query: it may hold secrets and is not logged).
    let path: String
    let requestId: String
    let start: UInt64
    let isHead: Bool
    let routeIndex: Int
    let routeName: String
    /// `X-AppCheck-Status` value and the log fields of the App Check step.
    var appCheck = AppCheckOutcome.skipped
    /// False when the request was answered before the App Check step ran (no outcome is counted then).
    var appCheckRan = false
    /// The route's enforcement when the request arrived (`enforce`, `monitor`, `off`).
    var mode = "off"
    var status = 0
    var upstreamStart: UInt64 = 0
    var upstreamEnd: UInt64 = 0
    var pool: UpstreamPool?
    var upstream: UpstreamConnection?
    /// The upstream request head (and nothing else: only body-less requests are retried), kept for one retry.
    var retainedRequest: [UInt8]?
    var retried = false
    var requestBody: RequestBodyState = .none
    var bodyReceived: Int64 = 0
    let maxBodyBytes: Int64
    var responseFraming: ClientResponseFraming = .pending
    var responseDone = false
    /// A `100 Continue` is owed once the body is wanted (RFC 9110 §10.1.1).
    var continuePending = false

    init(method: String, path: String, requestId: String, start: UInt64, routeIndex: Int, routeName: String, maxBodyBytes: Int64) {
        self.method = method
        self.path = path
        self.requestId = requestId
        self.start = start
        self.isHead = method == "HEAD"
        self.routeIndex = routeIndex
        self.routeName = routeName
        self.maxBodyBytes = maxBodyBytes
    }

    var requestDone: Bool {
        if case .done = requestBody { return true }
        if case .none = requestBody { return true }
        return false
    }
}

enum RequestBodyState {
    case none
    case length(remaining: Int64)
    case chunked(ChunkedDecoder)
    case done
}

/// How the response body is framed towards the client.
enum ClientResponseFraming {
    case pending
    case none
    case length(remaining: Int64)
    case chunked
    /// HTTP/1.0 client and a response of unknown length: the body ends when we close.
    case close
}

/// The result of the App Check step for one request, as logged and forwarded.
struct AppCheckOutcome {
    /// `X-AppCheck-Status`: verified | missing | invalid | reused | skipped.
    var status: String
    /// Firebase's request category: verified, outdated_client, unknown_origin, invalid, reused, skipped.
    var outcome: String
    var reason: String?
    var appId: String?
    /// First 16 hex chars of SHA-256 of the token, for logs.
    var tokenSHA256: String?

    static let skipped = AppCheckOutcome(status: "skipped", outcome: "skipped")
}
