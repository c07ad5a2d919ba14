/// The form of the gateway's own answers on a gRPC call (SPEC §6.1, docs/behaviour.md "WebSocket and gRPC"): HTTP
/// status 200, `content-type: application/grpc`, and one HEADERS frame that ends the stream ("Trailers-Only")
/// carrying `grpc-status`, `grpc-message` and `x-request-id`.
public enum GRPCStatus {
    public static let ok = 0
    public static let unknown = 2
    public static let invalidArgument = 3
    public static let deadlineExceeded = 4
    public static let permissionDenied = 7
    public static let resourceExhausted = 8
    public static let unimplemented = 12
    public static let `internal` = 13
    public static let unavailable = 14
    public static let unauthenticated = 16

    /// The gRPC status code for the HTTP status the same answer has on plain HTTP. SPEC §6.1's table (401, 403, 404,
    /// 400, 413, 429, 502, 503, 504), and the gateway's choices for the statuses it leaves open: 408 (the request body
    /// stalled past `body_timeout`) is DEADLINE_EXCEEDED, 431 (a head over the limits) RESOURCE_EXHAUSTED like 413,
    /// 500 INTERNAL, anything else UNKNOWN.
    public static func code(forHTTPStatus status: Int) -> Int {
        switch status {
        case 400: invalidArgument
        case 401: unauthenticated
        case 403: permissionDenied
        case 404: unimplemented
        case 408, 504: deadlineExceeded
        case 413, 429, 431: resourceExhausted
        case 500: `internal`
        case 502, 503: unavailable
        default: unknown
        }
    }

    /// `grpc-message`: `<error>: <reason>`, or `<error>` alone when there is no reason or it repeats the error
    /// (`no_route`), percent-encoded.
    public static func message(code: String, reason: String) -> String {
        percentEncoded(reason.isEmpty || reason == code ? code : code + ": " + reason)
    }

    /// The gRPC over HTTP/2 spec's `Percent-Encoded`: every byte of the UTF-8 text outside 0x20–0x7E, and `%`
    /// itself, becomes `%` and two upper-case hex digits; the rest is kept as is.
    public static func percentEncoded(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in text.utf8 {
            if b >= 0x20 && b <= 0x7E && b != UInt8(ascii: "%") {
                out.append(b)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The Trailers-Only fields of an answer, in order (`x-request-id` is added by the responder). `retryAfter` and
    /// `dpopChallenge` ride as metadata, as their headers do on plain HTTP.
    public static func fields(httpStatus: Int, code: String, reason: String, retryAfter: Int?,
                       dpopChallenge: Bool) -> [(String, String)] {
        var fields = [("content-type", "application/grpc"),
                      ("grpc-status", String(Self.code(forHTTPStatus: httpStatus))),
                      ("grpc-message", message(code: code, reason: reason))]
        if let retryAfter { fields.append(("retry-after", String(retryAfter))) }
        if dpopChallenge { fields.append(("www-authenticate", "DPoP error=\"invalid_dpop_proof\"")) }
        return fields
    }
}
