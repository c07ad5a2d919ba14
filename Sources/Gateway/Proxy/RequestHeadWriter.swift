import ProxyCore
import EventLoop
import GatewayConfig
import HTTPWire

/// Builds the request head sent upstream (docs/behaviour.md): hop-by-hop headers and those named in `Connection`
/// removed (RFC 9110 §7.6.1), client-sent `X-AppCheck-*` removed, the token removed unless the route
/// forwards it, `X-Forwarded-*`, `X-Request-Id` and the `X-AppCheck-*` results added, and the body framing
/// re-stated (`Content-Length` as received, or `Transfer-Encoding: chunked`). Header names containing `_` are
/// dropped (nginx's default): CGI-style servers read `X_AppCheck_Status` as `X-AppCheck-Status`.
///
/// Defence in depth (docs/behaviour.md): whatever its source (client, claim, config), no CR, LF or NUL ever reaches the
/// upstream inside the request line or a header value; `write` returns nil instead, and the caller answers 400.
///
/// The rules are stated once (`emit`) and framed by a `RequestHeadSink`: HTTP/1.1 text (`write`), or, for an `h2`
/// upstream's stream, HTTP/2 field records (`writeH2`: the same fields as `H2ClientRequestHead` makes of the text).
enum RequestHeadWriter {
    /// The head as a new array (tests and slow paths); nil when a value would carry CR, LF or NUL.
    package static func write(head: HTTPRequestHead, target: RequestTarget, route: CompiledRoute, upstream: UpstreamSettings,
                      requestId: String, appCheck: AppCheckOutcome, peerIP: String, trusted: Bool,
                      scheme: String) -> [UInt8]? {
        let out = IOBuffer(capacity: 0)
        guard write(head: head, path: target.path, query: target.query, absoluteHost: target.absoluteHost,
                    route: route, upstream: upstream, requestId: RequestID(client: requestId), appCheck: appCheck, peerIP: peerIP,
                    trusted: trusted, scheme: scheme, into: out) else { return nil }
        return out.readableBytes()
    }

    /// Appends the head to `out`, which must be empty (the loop's reusable head buffer on the request path: no
    /// allocation per request). Returns false, with `out` holding a partial head the caller discards, when a value
    /// would carry CR, LF or NUL.
    /// Of the route, `forward_token` and the enforcement are read. The target comes as its parts (`RequestTarget`'s):
    /// the usual one is the head's own `target` string, passed without building a `RequestTarget` per request.
    static func write(head: HTTPRequestHead, path: String, query: Substring?, absoluteHost: String?,
                      route: CompiledRoute,
                      upstream: UpstreamSettings, requestId: RequestID, appCheck: AppCheckOutcome, peerIP: String,
                      trusted: Bool, scheme: String, into out: IOBuffer) -> Bool {
        var sink = HTTP1HeadSink(out)
        emit(head: head, path: path, query: query, absoluteHost: absoluteHost, route: route, upstream: upstream,
             requestId: requestId, appCheck: appCheck, peerIP: peerIP, trusted: trusted, scheme: scheme, into: &sink,
             out: out)
        return sink.safe
    }

    /// The same head for an `h2` upstream, as HTTP/2 field records (`H2RequestFields`) appended to `out`, which must be
    /// empty: the same fields in the same order with the same values as `write`'s text, which `H2ClientRequestHead`
    /// would make of it, without writing that text and parsing it back. Nil, as for `write`, when a value would carry
    /// CR, LF or NUL; `limits` (the upstream parser limits) are applied to the size the text would have had.
    static func writeH2(head: HTTPRequestHead, path: String, query: Substring?, absoluteHost: String?,
                        route: CompiledRoute, upstream: UpstreamSettings, requestId: RequestID, appCheck: AppCheckOutcome,
                        peerIP: String, trusted: Bool, scheme: String, limits: HTTPParserLimits,
                        into out: IOBuffer) -> H2RequestHeadSink.Draft? {
        var sink = H2RequestHeadSink()
        emit(head: head, path: path, query: query, absoluteHost: absoluteHost, route: route, upstream: upstream,
             requestId: requestId, appCheck: appCheck, peerIP: peerIP, trusted: trusted, scheme: scheme, into: &sink,
             out: out)
        return sink.safe ? sink.draft(limits: limits) : nil
    }

    /// The one statement of which fields go upstream, in which order and with which values; `sink` frames them as
    /// HTTP/1.1 text or HTTP/2 records. Values go straight into `out`.
    @inline(__always)
    static func emit<Sink: RequestHeadSink>(head: HTTPRequestHead, path: String, query: Substring?, absoluteHost: String?,
                                            route: CompiledRoute, upstream: UpstreamSettings, requestId: RequestID,
                                            appCheck: AppCheckOutcome, peerIP: String, trusted: Bool, scheme: String,
                                            into sink: inout Sink, out: IOBuffer) {
        precondition(out.readerIndex == 0, "RequestHeadWriter: the output buffer must start empty")
        out.reserve(head.headers.bytes.count + 512)
        sink.requestLine(method: head.method, basePath: upstream.basePath, path: path, query: query, out)

        var host: UnsafeRawBufferPointer?
        var clientForwardedFor: UnsafeRawBufferPointer?
        var moreForwardedFor: [UnsafeRawBufferPointer] = []
        var clientProto: UnsafeRawBufferPointer?
        var clientHost: UnsafeRawBufferPointer?
        // `TE: trailers`, the one TE value forwarded, and only to an HTTP/2 upstream (SPEC §6.1; over HTTP/1.1 it
        // would need `Connection: TE`, and the response's chunked trailers are not relayed).
        var teTrailers = false
        let h2 = upstream.httpProtocol == .h2
        let tokens = head.connectionTokens
        head.headers.bytes.withUnsafeBytes { raw in
            for f in head.headers.fields {
                let name = UnsafeRawBufferPointer(rebasing: raw[Int(f.nameStart)..<Int(f.nameEnd)])
                let value = UnsafeRawBufferPointer(rebasing: raw[Int(f.valueStart)..<Int(f.valueEnd)])
                switch HeaderKind.classify(name) {
                case .pass:
                    if !tokens.isEmpty && HeaderKind.isListed(name, in: tokens) { continue }
                    if name.contains(UInt8(ascii: "_")) { continue }
                    sink.field(name, value, out)
                case .token, .dpop:
                    if route.forwardToken { sink.field(name, value, out) }
                case .host:
                    if host == nil { host = value }
                case .forwardedFor:
                    if trusted {
                        if clientForwardedFor == nil { clientForwardedFor = value } else { moreForwardedFor.append(value) }
                    }
                case .forwardedProto:
                    if trusted && clientProto == nil { clientProto = value }
                case .forwardedHost:
                    if trusted && clientHost == nil { clientHost = value }
                case .hopByHop:
                    if h2, !teTrailers, name.count == 2, HTTPSyntax.equalsLowercased(name, "te") {
                        teTrailers = TrailerFilter.listsTrailers(value)
                    }
                case .appCheckInternal, .requestId, .contentLength, .expect:
                    continue
                }
            }
            // HTTP/1.1 requires Host (RFC 9112 §3.2); an HTTP/1.0 client may have sent none: name the upstream. An
            // absolute-form target's authority wins over the field (RFC 9112 §3.2.2). (HTTP/2: `:authority`.)
            sink.beginField(.host, out)
            let hostStart = out.writerIndex
            if let absolute = absoluteHost { out.append(absolute) } else if let host { out.append(host) } else {
                out.append(upstream.authority)
            }
            let hostEnd = out.writerIndex
            sink.endField(checked: false, out)
            sink.beginField(.forwardedFor, out)
            if let xff = clientForwardedFor {
                out.append(xff)
                for more in moreForwardedFor {
                    out.append(static: ", ")
                    out.append(more)
                }
                if !xff.isEmpty || !moreForwardedFor.isEmpty { out.append(static: ", ") }
            }
            out.append(peerIP)
            sink.endField(checked: false, out)
            sink.beginField(.forwardedProto, out)
            if let clientProto { out.append(clientProto) } else { out.append(scheme) }
            sink.endField(checked: false, out)
            if let clientHost {
                sink.beginField(.forwardedHost, out)
                out.append(clientHost)
                sink.endField(checked: false, out)
            } else if absoluteHost != nil || host != nil {
                // The same bytes as the Host value written above (already checked).
                sink.beginField(.forwardedHost, out)
                out.appendCopy(from: hostStart, to: hostEnd)
                sink.endField(checked: true, out)
            }
        }
        sink.beginField(.requestId, out)
        requestId.append(to: out)
        sink.endField(checked: false, out)
        sink.beginField(.appCheckStatus, out)
        out.append(appCheck.status.name)
        sink.endField(checked: false, out)
        if appCheck.status == .verified, let appId = appCheck.appId {
            sink.beginField(.appCheckAppId, out)
            out.append(appId)
            sink.endField(checked: false, out)
        }
        if route.enforcement == .monitor, appCheck.status != .verified, appCheck.status != .skipped,
           let reason = appCheck.reason {
            sink.beginField(.appCheckReason, out)
            out.append(reason)
            sink.endField(checked: false, out)
        }
        if teTrailers { sink.constantField(.teTrailers, out) }
        switch head.framing {
        case .none: break
        case .contentLength(let n):
            sink.beginField(.contentLength, out)
            out.appendDecimal(Int(n))
            sink.endField(checked: true, out)
        case .chunked:
            sink.constantField(.chunked, out)
        }
        sink.finish(framing: head.framing, out)
    }

    /// True when the written bytes of `out` from index `from` hold CR, LF or NUL: what could end a header line or a
    /// request early.
    static func hasLineBreakOrNUL(_ out: IOBuffer, from: Int) -> Bool {
        let bytes = out.base
        var i = from
        let end = out.writerIndex
        // Eight bytes at a time while none is below 0x0E (CR, LF and NUL all are; so is HTAB, which values may hold,
        // so a word that fails goes through the byte check).
        let low: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
        while i + 8 <= end {
            let word = UInt64(littleEndian: (bytes + i).loadUnaligned(as: UInt64.self))
            if (word &- 0x0E &* low) & ~word & high != 0 { break }
            i += 8
        }
        while i < end {
            let b = bytes.load(fromByteOffset: i, as: UInt8.self)
            if b == 13 || b == 10 || b == 0 { return true }
            i += 1
        }
        return false
    }
}

/// Writes the response head sent to the client: status line, upstream headers minus hop-by-hop ones,
/// our `X-Request-Id`, and framing fitting the client (chunked for HTTP/1.1 when the length is unknown;
/// for HTTP/1.0, a close-delimited body).
package enum ResponseHeadWriter {
    static func write(_ head: HTTPResponseHead, framing: ResponseBodyFraming, into out: IOBuffer, requestId: RequestID,
                      responseFraming: inout ClientResponseFraming, clientVersionMinor: Int, closeAfterResponse: inout Bool) {
        writeStatusLine(head.status, into: out)
        // An HTTP/2 upstream's head has no reason phrase (RFC 9113 §8.3.2): the registry's, as for our own answers.
        if head.reasonRange.isEmpty && head.versionMinor == 1 && head.connectionTokens.isEmpty {
            out.append(ErrorResponse.reasonPhrase(head.status))
        } else {
            head.withReasonBytes { out.append($0) }
        }
        out.append(static: "\r\n")
        ResponseHeaderFilter.forEachRun(head, framing: framing) { bytes, lineEnd in
            out.append(bytes)
            if lineEnd { out.append(static: "\r\n") }
        }
        out.append(static: "X-Request-Id: ")
        requestId.append(to: out)
        out.append(static: "\r\n")
        switch framing {
        case .none:
            responseFraming = .none
        case .contentLength(let n):
            out.append(static: "Content-Length: ")
            out.appendDecimal(Int(n))
            out.append(static: "\r\n")
            responseFraming = .length(remaining: n)
        case .chunked, .untilClose:
            if clientVersionMinor >= 1 {
                out.append(static: "Transfer-Encoding: chunked\r\n")
                responseFraming = .chunked
            } else {
                closeAfterResponse = true
                responseFraming = .close
            }
        }
        if closeAfterResponse { out.append(static: "Connection: close\r\n") }
        out.append(static: "\r\n")
    }

    /// `HTTP/1.1 NNN ` (with the space before the reason phrase), written in place: the one status-line writer
    /// for proxied responses, the gateway's own answers and the admin listener.
    package static func writeStatusLine(_ status: Int, into out: IOBuffer) {
        out.append(static: "HTTP/1.1 ")
        if status >= 100 && status <= 999 {
            out.append(byte: UInt8(ascii: "0") &+ UInt8(status / 100))
            out.append(byte: UInt8(ascii: "0") &+ UInt8(status / 10 % 10))
            out.append(byte: UInt8(ascii: "0") &+ UInt8(status % 10))
        } else {
            out.appendDecimal(status)
        }
        out.append(byte: UInt8(ascii: " "))
    }
}
