import EventLoop
import HTTPWire

/// What `RequestHeadWriter.emit` writes an upstream request head into: HTTP/1.1 text (`HTTP1HeadSink`) or HTTP/2 field
/// records (`H2RequestHeadSink`), both in an `IOBuffer` passed to every call (held by the sink, it cost a retain and
/// a release per request; not retained, an `unowned(unsafe)` one cost ~800). The writer alone decides which fields go, in which order and
/// with which values (one statement of the rules for both protocols); a sink only frames them, and checks each value as
/// it is closed (CR, LF or NUL anywhere makes the head unsafe: `safe` false, and the request is answered 400).
protocol RequestHeadSink {
    /// False once a value carried CR, LF or NUL.
    var safe: Bool { get }
    /// The request line (HTTP/2: `:method` and `:path`); the target is `basePath`, `path`, then `?query` if any.
    mutating func requestLine(method: String, basePath: String, path: String, query: Substring?, _ out: IOBuffer)
    /// A client field forwarded as received (its name as the client spelled it).
    mutating func field(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ out: IOBuffer)
    /// Starts one of the gateway's own fields; its value is appended to `out` next, then `endField`.
    mutating func beginField(_ field: UpstreamHeadField, _ out: IOBuffer)
    /// Ends the field begun last. `checked`: its bytes cannot hold CR, LF or NUL (digits, a copy of a value checked
    /// before), so the text writer skips that scan.
    mutating func endField(checked: Bool, _ out: IOBuffer)
    /// A field whose value is fixed (`.teTrailers`, `.chunked`).
    mutating func constantField(_ field: UpstreamHeadField, _ out: IOBuffer)
    /// The end of the head; `framing` is the body's (HTTP/2: whether HEADERS ends the stream).
    mutating func finish(framing: RequestBodyFraming, _ out: IOBuffer)
}

/// The fields the gateway writes itself (docs/behaviour.md), with their HTTP/1.1 spelling and their HTTP/2 name.
enum UpstreamHeadField {
    case host, forwardedFor, forwardedProto, forwardedHost, requestId, appCheckStatus, appCheckAppId, appCheckReason
    case contentLength
    /// `TE: trailers` (only to an `h2` upstream).
    case teTrailers
    /// `Transfer-Encoding: chunked` (HTTP/1.1 only; an HTTP/2 body is framed by DATA frames).
    case chunked

    /// What the text writer appends before the value: the line end of the field before (the head's own fields
    /// follow the client's, whose lines end in CRLF, and `Host` comes first), the name and `: `. For the constant
    /// fields, the whole line without its CRLF.
    var http1Prefix: StaticString {
        switch self {
        case .host: "Host: "
        case .forwardedFor: "\r\nX-Forwarded-For: "
        case .forwardedProto: "\r\nX-Forwarded-Proto: "
        case .forwardedHost: "\r\nX-Forwarded-Host: "
        case .requestId: "\r\nX-Request-Id: "
        case .appCheckStatus: "\r\nX-AppCheck-Status: "
        case .appCheckAppId: "\r\nX-AppCheck-App-Id: "
        case .appCheckReason: "\r\nX-AppCheck-Reason: "
        case .contentLength: "\r\nContent-Length: "
        case .teTrailers: "\r\nTE: trailers"
        case .chunked: "\r\nTransfer-Encoding: chunked"
        }
    }

    /// The HTTP/2 name (lower case). `host` becomes `:authority`; `transfer-encoding` is never sent over HTTP/2.
    var h2Name: StaticString {
        switch self {
        case .host: "host"
        case .forwardedFor: "x-forwarded-for"
        case .forwardedProto: "x-forwarded-proto"
        case .forwardedHost: "x-forwarded-host"
        case .requestId: "x-request-id"
        case .appCheckStatus: "x-appcheck-status"
        case .appCheckAppId: "x-appcheck-app-id"
        case .appCheckReason: "x-appcheck-reason"
        case .contentLength: "content-length"
        case .teTrailers: "te"
        case .chunked: "transfer-encoding"
        }
    }
}
