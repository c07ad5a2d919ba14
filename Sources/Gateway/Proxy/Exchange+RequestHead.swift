import ProxyCore
import EventLoop
import HTTPWire

/// The exchange's upstream request head: written into the loop's head buffer as HTTP/1.1 text or, for an `h2`
/// upstream's stream, as HTTP/2 field records, by `RequestHeadWriter`'s one set of forwarding rules.
extension Exchange {
    /// What `writeRequestHead` wrote into the loop's head buffer.
    enum WrittenHead {
        /// A value would carry CR, LF or NUL: nothing may be sent.
        case unsafe
        /// HTTP/1.1 text.
        case http1
        /// HTTP/2 field records (`H2RequestFields`), for an `h2` upstream's stream.
        case h2(H2RequestHeadSink.Draft)
    }

    /// Writes the upstream request head into the loop's head buffer (`LoopEnvironment.requestHeadBuffer`), which
    /// `connectUpstream` sends at once: as HTTP/2 field records when the pool's channel will be an HTTP/2 stream (an
    /// `h2` upstream, no WebSocket handshake: `writeH2RequestHead`), else as HTTP/1.1 text.
    func writeRequestHead(_ head: HTTPRequestHead, route: CompiledRoute, pool: UpstreamPool,
                          responder: ExchangeResponder) -> WrittenHead {
        let out = context.buffers.requestHead
        out.clear()
        var upgrade = false
        if case .requested = tunnel { upgrade = true }
        if pool.h2 != nil && !upgrade { return writeH2RequestHead(head, route: route, pool: pool, responder: responder, into: out) }
        let safe = writeHTTP1RequestHead(head, route: route, pool: pool, responder: responder, into: out)
        if upgrade { Self.addUpgradeFields(out) }
        return safe ? .http1 : .unsafe
    }

    /// `writeRequestHead` as HTTP/1.1 text; false when a value would carry CR, LF or NUL. (Each form has a function of
    /// its own, so the text's path stays as it was before the HTTP/2 one was added.)
    @inline(never)
    private func writeHTTP1RequestHead(_ head: HTTPRequestHead, route: CompiledRoute, pool: UpstreamPool,
                                       responder: ExchangeResponder, into out: IOBuffer) -> Bool {
        @inline(__always) func write(_ path: String, _ query: Substring?, _ absoluteHost: String?) -> Bool {
            RequestHeadWriter.write(
                head: head, path: path, query: query, absoluteHost: absoluteHost,
                route: route, upstream: pool.settings, requestId: id,
                appCheck: appCheck, peerIP: responder.peerIP, trusted: responder.peerTrusted, scheme: responder.scheme,
                into: out)
        }
        if let target { return write(target.path, target.query, target.absoluteHost) }
        // Admitted with the head's own target (see `target`): what `RequestTarget.parse` gave is that string.
        return write(head.target, nil, nil)
    }

    /// `writeRequestHead` as HTTP/2 field records for an HTTP/2 stream; `.unsafe` when a value would carry CR, LF or NUL.
    @inline(never)
    private func writeH2RequestHead(_ head: HTTPRequestHead, route: CompiledRoute, pool: UpstreamPool,
                                    responder: ExchangeResponder, into out: IOBuffer) -> WrittenHead {
        @inline(__always) func write(_ path: String, _ query: Substring?, _ absoluteHost: String?) -> H2RequestHeadSink.Draft? {
            RequestHeadWriter.writeH2(
                head: head, path: path, query: query, absoluteHost: absoluteHost,
                route: route, upstream: pool.settings, requestId: id,
                appCheck: appCheck, peerIP: responder.peerIP, trusted: responder.peerTrusted, scheme: responder.scheme,
                limits: context.runtime.upstreamParserLimits, into: out)
        }
        let draft: H2RequestHeadSink.Draft?
        if let target { draft = write(target.path, target.query, target.absoluteHost) } else {
            draft = write(head.target, nil, nil)
        }
        guard let draft else { return .unsafe }
        return .h2(draft)
    }
}
