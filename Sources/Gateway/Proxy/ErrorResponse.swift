import EventLoop

/// The answers the gateway gives itself (docs/behaviour.md): JSON `{"error":…,"reason":…,"request_id":…}` with
/// `Content-Type: application/json`, the request id, and `Retry-After` on 503s.
enum ErrorResponse {
    /// The JSON body of docs/behaviour.md, shared by HTTP/1.1 and HTTP/2 answers.
    static func body(code: String, reason: String, requestId: String) -> String {
        "{\"error\":\"\(code)\",\"reason\":\"\(reason)\",\"request_id\":\"\(requestId)\"}"
    }

    static func write(into out: IOBuffer, status: Int, code: String, reason: String, requestId: String, close: Bool,
                      retryAfter: Int?, headOnly: Bool) {
        let body = Self.body(code: code, reason: reason, requestId: requestId)
        ResponseHeadWriter.writeStatusLine(status, into: out)
        out.append(reasonPhrase(status))
        out.append("\r\nContent-Type: application/json\r\nContent-Length: ")
        out.appendDecimal(body.utf8.count)
        out.append("\r\nX-Request-Id: ")
        out.append(requestId)
        if let retryAfter {
            out.append("\r\nRetry-After: ")
            out.appendDecimal(retryAfter)
        }
        if close { out.append("\r\nConnection: close") }
        out.append("\r\n\r\n")
        if !headOnly { out.append(body) }
    }

    /// RFC 9110 §15 reason phrases for the statuses the gateway produces.
    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 431: "Request Header Fields Too Large"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Error"
        }
    }
}
