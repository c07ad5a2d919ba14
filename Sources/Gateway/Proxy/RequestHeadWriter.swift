import EventLoop
import HTTPWire

/// Builds the request head sent upstream (docs/behaviour.md): hop-by-hop headers and those named in `Connection`
/// removed (RFC 9110 §7.6.1), client-sent `X-AppCheck-*` removed, the token removed unless the route
/// forwards it, `X-Forwarded-*`, `X-Request-Id` and the `X-AppCheck-*` results added, and the body framing
/// re-stated (`Content-Length` as received, or `Transfer-Encoding: chunked`). Header names containing `_` are
/// dropped (nginx's default): CGI-style servers read `X_AppCheck_Status` as `X-AppCheck-Status`.
///
/// Defence in depth (docs/behaviour.md): whatever its source (client, claim, config), no CR, LF or NUL ever reaches the
/// upstream inside the request line or a header value; `write` returns nil instead, and the caller answers 400.
enum RequestHeadWriter {
    static func write(head: HTTPRequestHead, target: RequestTarget, route: RouteSettings, upstream: UpstreamSettings,
                      requestId: String, appCheck: AppCheckOutcome, peerIP: String, trusted: Bool,
                      scheme: String) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(head.headers.bytes.count + 256)
        // Start of the current value: each value is scanned for CR/LF/NUL once written.
        var mark = 0
        var safe = true
        func checkValue() {
            if safe && hasLineBreakOrNUL(out, from: mark) { safe = false }
        }
        out.appendUTF8(head.method)
        out.append(UInt8(ascii: " "))
        out.appendUTF8(upstream.basePath)
        out.appendUTF8(target.path)
        if let q = target.query {
            out.append(UInt8(ascii: "?"))
            out.appendUTF8(q)
        }
        checkValue()
        out.appendUTF8(" HTTP/1.1\r\n")

        var host: String? = target.absoluteHost
        var clientForwardedFor: [UInt8]?
        var clientProto: [UInt8]?
        var clientHost: [UInt8]?
        let tokens = head.connectionTokens
        head.headers.bytes.withUnsafeBytes { raw in
            for f in head.headers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                let value = UnsafeRawBufferPointer(rebasing: raw[Int(f.valueStart)..<Int(f.valueEnd)])
                let kind = HeaderKind.classify(name)
                switch kind {
                case .pass:
                    if !tokens.isEmpty && HeaderKind.isListed(name, in: tokens) { continue }
                    if name.contains(UInt8(ascii: "_")) { continue }
                    out.append(contentsOf: name)
                    out.append(UInt8(ascii: ":"))
                    out.append(UInt8(ascii: " "))
                    mark = out.count
                    out.append(contentsOf: value)
                    checkValue()
                    out.append(13); out.append(10)
                case .token:
                    if route.forwardToken {
                        out.append(contentsOf: name)
                        out.appendUTF8(": ")
                        mark = out.count
                        out.append(contentsOf: value)
                        checkValue()
                        out.append(13); out.append(10)
                    }
                case .host:
                    if host == nil { host = String(decoding: value, as: UTF8.self) }
                case .forwardedFor:
                    if trusted {
                        if clientForwardedFor == nil { clientForwardedFor = Array(value) } else {
                            clientForwardedFor!.append(contentsOf: ", ".utf8)
                            clientForwardedFor!.append(contentsOf: value)
                        }
                    }
                case .forwardedProto:
                    if trusted && clientProto == nil { clientProto = Array(value) }
                case .forwardedHost:
                    if trusted && clientHost == nil { clientHost = Array(value) }
                case .hopByHop, .appCheckInternal, .requestId, .contentLength, .expect:
                    continue
                }
            }
        }
        // HTTP/1.1 requires Host (RFC 9112 §3.2); an HTTP/1.0 client may have sent none: name the upstream.
        out.appendUTF8("Host: ")
        mark = out.count
        out.appendUTF8(host ?? upstream.authority)
        checkValue()
        out.append(13); out.append(10)
        out.appendUTF8("X-Forwarded-For: ")
        mark = out.count
        if let xff = clientForwardedFor, !xff.isEmpty {
            out.append(contentsOf: xff)
            out.appendUTF8(", ")
        }
        out.appendUTF8(peerIP)
        checkValue()
        out.appendUTF8("\r\nX-Forwarded-Proto: ")
        mark = out.count
        out.append(contentsOf: clientProto ?? Array(scheme.utf8))
        checkValue()
        if let h = clientHost ?? host.map({ Array($0.utf8) }) {
            out.appendUTF8("\r\nX-Forwarded-Host: ")
            mark = out.count
            out.append(contentsOf: h)
            checkValue()
        }
        out.appendUTF8("\r\nX-Request-Id: ")
        mark = out.count
        out.appendUTF8(requestId)
        checkValue()
        out.appendUTF8("\r\nX-AppCheck-Status: ")
        mark = out.count
        out.appendUTF8(appCheck.status)
        checkValue()
        if appCheck.status == "verified", let appId = appCheck.appId {
            out.appendUTF8("\r\nX-AppCheck-App-Id: ")
            mark = out.count
            out.appendUTF8(appId)
            checkValue()
        }
        if route.enforcement == .monitor, appCheck.status != "verified", appCheck.status != "skipped",
           let reason = appCheck.reason {
            out.appendUTF8("\r\nX-AppCheck-Reason: ")
            mark = out.count
            out.appendUTF8(reason)
            checkValue()
        }
        switch head.framing {
        case .none: break
        case .contentLength(let n):
            out.appendUTF8("\r\nContent-Length: ")
            out.appendUTF8(String(n))
        case .chunked:
            out.appendUTF8("\r\nTransfer-Encoding: chunked")
        }
        out.appendUTF8("\r\n\r\n")
        return safe ? out : nil
    }

    /// True when `bytes[from...]` holds CR, LF or NUL: what could end a header line or a request early.
    static func hasLineBreakOrNUL(_ bytes: [UInt8], from: Int) -> Bool {
        var i = from
        while i < bytes.count {
            let b = bytes[i]
            if b == 13 || b == 10 || b == 0 { return true }
            i += 1
        }
        return false
    }
}

/// Writes the response head sent to the client: status line, upstream headers minus hop-by-hop ones,
/// our `X-Request-Id`, and framing fitting the client (chunked for HTTP/1.1 when the length is unknown;
/// for HTTP/1.0, a close-delimited body).
enum ResponseHeadWriter {
    static func write(_ head: HTTPResponseHead, framing: ResponseBodyFraming, into out: IOBuffer, requestId: String,
                      responseFraming: inout ClientResponseFraming, clientVersionMinor: Int, closeAfterResponse: inout Bool) {
        out.append(statusLine(head.status))
        out.append(head.reason)
        out.append(crlf)
        ResponseHeaderFilter.forEach(head, framing: framing) { _, _, line in
            out.append(line)
            out.append(crlf)
        }
        out.append(requestIdPrefix)
        out.append(requestId)
        out.append(crlf)
        switch framing {
        case .none:
            responseFraming = .none
        case .contentLength(let n):
            out.append(contentLengthPrefix)
            out.appendDecimal(Int(n))
            out.append(crlf)
            responseFraming = .length(remaining: n)
        case .chunked, .untilClose:
            if clientVersionMinor >= 1 {
                out.append(chunkedHeader)
                responseFraming = .chunked
            } else {
                closeAfterResponse = true
                responseFraming = .close
            }
        }
        if closeAfterResponse { out.append(connectionClose) }
        out.append(crlf)
    }

    private static let crlf: [UInt8] = [13, 10]
    private static let requestIdPrefix: [UInt8] = Array("X-Request-Id: ".utf8)
    private static let contentLengthPrefix: [UInt8] = Array("Content-Length: ".utf8)
    private static let chunkedHeader: [UInt8] = Array("Transfer-Encoding: chunked\r\n".utf8)
    private static let connectionClose: [UInt8] = Array("Connection: close\r\n".utf8)

    private static let statusLines: [[UInt8]] = (0..<600).map { Array("HTTP/1.1 \($0) ".utf8) }
    static func statusLine(_ status: Int) -> [UInt8] {
        status >= 0 && status < 600 ? statusLines[status] : Array("HTTP/1.1 \(status) ".utf8)
    }
}

extension Array where Element == UInt8 {
    /// Appends the UTF-8 of `string` with one copy (`append(contentsOf: string.utf8)` takes a slow generic path).
    @inline(__always)
    mutating func appendUTF8(_ string: String) {
        var s = string
        s.withUTF8 { append(contentsOf: $0) }
    }

    @inline(__always)
    mutating func appendUTF8(_ string: Substring) {
        var s = string
        s.withUTF8 { append(contentsOf: $0) }
    }
}
