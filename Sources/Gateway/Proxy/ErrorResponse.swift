import ProxyCore
import EventLoop

/// The answers the gateway gives itself (docs/behaviour.md): JSON `{"error":…,"reason":…,"request_id":…}` with
/// `Content-Type: application/json`, the request id, and `Retry-After` on 503s.
package enum ErrorResponse {
    /// The JSON body of docs/behaviour.md, shared by HTTP/1.1 and HTTP/2 answers; it ends with a newline, so
    /// `curl -i` output does not run into the next response.
    package static func body(code: String, reason: String, requestId: String) -> String {
        "{\"error\":\"\(code)\",\"reason\":\"\(reason)\",\"request_id\":\"\(requestId)\"}\n"
    }

    package static func write(into out: IOBuffer, status: Int, code: String, reason: String, requestId: String, close: Bool,
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

    /// The reason phrase of every status the gateway writes itself (its own errors, the issuer's answers, the
    /// admin listener): RFC 9110 §15's registry, and 429 (RFC 6585). A status outside it gets an empty phrase,
    /// which HTTP/1.1 allows (RFC 9112 §4) — never a made-up word.
    package static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 101: "Switching Protocols"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 203: "Non-Authoritative Information"
        case 204: "No Content"
        case 205: "Reset Content"
        case 206: "Partial Content"
        case 300: "Multiple Choices"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 402: "Payment Required"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 407: "Proxy Authentication Required"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 416: "Range Not Satisfiable"
        case 417: "Expectation Failed"
        case 421: "Misdirected Request"
        case 422: "Unprocessable Content"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: ""
        }
    }
}
