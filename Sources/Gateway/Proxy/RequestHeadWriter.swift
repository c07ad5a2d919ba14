import EventLoop
import HTTPWire

/// Builds the request head sent upstream (SPEC §6): hop-by-hop headers and those named in `Connection`
/// removed (RFC 9110 §7.6.1), client-sent `X-AppCheck-*` removed, the token removed unless the route
/// forwards it, `X-Forwarded-*`, `X-Request-Id` and the `X-AppCheck-*` results added, and the body framing
/// re-stated (`Content-Length` as received, or `Transfer-Encoding: chunked`).
enum RequestHeadWriter {
    static func write(head: HTTPRequestHead, target: RequestTarget, route: RouteSettings, upstream: UpstreamSettings,
                      exchange ex: Exchange, peerIP: String, trusted: Bool, scheme: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(head.headers.bytes.count + 256)
        out.append(contentsOf: head.method.utf8)
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: upstream.basePath.utf8)
        out.append(contentsOf: target.path.utf8)
        if let q = target.query {
            out.append(UInt8(ascii: "?"))
            out.append(contentsOf: q.utf8)
        }
        out.append(contentsOf: " HTTP/1.1\r\n".utf8)

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
                    out.append(contentsOf: name)
                    out.append(UInt8(ascii: ":"))
                    out.append(UInt8(ascii: " "))
                    out.append(contentsOf: value)
                    out.append(13); out.append(10)
                case .token:
                    if route.forwardToken {
                        out.append(contentsOf: name)
                        out.append(contentsOf: ": ".utf8)
                        out.append(contentsOf: value)
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
        out.append(contentsOf: "Host: ".utf8)
        out.append(contentsOf: (host ?? upstream.authority).utf8)
        out.append(13); out.append(10)
        out.append(contentsOf: "X-Forwarded-For: ".utf8)
        if let xff = clientForwardedFor, !xff.isEmpty {
            out.append(contentsOf: xff)
            out.append(contentsOf: ", ".utf8)
        }
        out.append(contentsOf: peerIP.utf8)
        out.append(contentsOf: "\r\nX-Forwarded-Proto: ".utf8)
        out.append(contentsOf: clientProto ?? Array(scheme.utf8))
        if let h = clientHost ?? host.map({ Array($0.utf8) }) {
            out.append(contentsOf: "\r\nX-Forwarded-Host: ".utf8)
            out.append(contentsOf: h)
        }
        out.append(contentsOf: "\r\nX-Request-Id: ".utf8)
        out.append(contentsOf: ex.requestId.utf8)
        out.append(contentsOf: "\r\nX-AppCheck-Status: ".utf8)
        out.append(contentsOf: ex.appCheck.status.utf8)
        if ex.appCheck.status == "verified", let appId = ex.appCheck.appId {
            out.append(contentsOf: "\r\nX-AppCheck-App-Id: ".utf8)
            out.append(contentsOf: appId.utf8)
        }
        if route.enforcement == .monitor, ex.appCheck.status != "verified", ex.appCheck.status != "skipped",
           let reason = ex.appCheck.reason {
            out.append(contentsOf: "\r\nX-AppCheck-Reason: ".utf8)
            out.append(contentsOf: reason.utf8)
        }
        switch head.framing {
        case .none: break
        case .contentLength(let n):
            out.append(contentsOf: "\r\nContent-Length: ".utf8)
            out.append(contentsOf: String(n).utf8)
        case .chunked:
            out.append(contentsOf: "\r\nTransfer-Encoding: chunked".utf8)
        }
        out.append(contentsOf: "\r\n\r\n".utf8)
        return out
    }
}

/// Writes the response head sent to the client: status line, upstream headers minus hop-by-hop ones,
/// our `X-Request-Id`, and framing fitting the client (chunked for HTTP/1.1 when the length is unknown;
/// for HTTP/1.0, a close-delimited body).
enum ResponseHeadWriter {
    static func write(_ head: HTTPResponseHead, framing: ResponseBodyFraming, into out: IOBuffer, exchange ex: Exchange,
                      clientVersionMinor: Int, closeAfterResponse: inout Bool) {
        out.append(statusLine(head.status))
        out.append(head.reason)
        out.append(crlf)
        let tokens = head.connectionTokens
        let keepLength: Bool
        if case .none = framing { keepLength = true } else { keepLength = false }
        head.headers.bytes.withUnsafeBytes { raw in
            for f in head.headers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                switch HeaderKind.classify(name) {
                case .hopByHop, .requestId: continue
                case .contentLength: if !keepLength { continue }
                default:
                    if !tokens.isEmpty && HeaderKind.isListed(name, in: tokens) { continue }
                }
                out.append(UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.valueEnd)]))
                out.append(crlf)
            }
        }
        out.append(requestIdPrefix)
        out.append(ex.requestId)
        out.append(crlf)
        switch framing {
        case .none:
            ex.responseFraming = .none
        case .contentLength(let n):
            out.append(contentLengthPrefix)
            out.appendDecimal(Int(n))
            out.append(crlf)
            ex.responseFraming = .length(remaining: n)
        case .chunked, .untilClose:
            if clientVersionMinor >= 1 {
                out.append(chunkedHeader)
                ex.responseFraming = .chunked
            } else {
                closeAfterResponse = true
                ex.responseFraming = .close
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
