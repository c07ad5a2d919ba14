import ProxyCore
import HTTPWire

/// `Exchange`: the upstream seam (`UpstreamOwner`): the response as it arrives, failures, the flow signals and the
/// trailers (SPEC §6.1 "Trailers").
extension Exchange {
    func upstreamResponseHead(_ head: HTTPResponseHead, framing: ResponseBodyFraming) -> Bool {
        perform(machine.upstreamHead(head, framing: framing))
    }

    func upstreamResponseBody(_ data: UnsafeRawBufferPointer) -> Bool {
        guard data.count > 0 else { return true }
        return perform(machine.upstreamPart(), part: data)
    }

    func upstreamResponseEnd() { perform(machine.upstreamEnd()) }

    func upstreamFailed(_ kind: UpstreamFailure) {
        let action = machine.upstreamFailed(kind)
        if case .none = action { return }
        context.recorder.countUpstreamError(self, kind)
        perform(action)
    }

    func upstreamDrained() { perform(machine.upstreamDrained()) }

    /// The client's send buffer drained: the upstream may read more of the response.
    func clientDrained() {
        // Only a response being relayed has an upstream to wake. The tag is tested first: reading the channel out of
        // the state copies it, and this runs after every flush of the client's buffer.
        guard case .streamingResponse = machine.state, let up = machine.upstream else { return }
        up.clientDrained()
    }

    /// The upstream's response trailers: kept until the response ends, when the responder writes them (an HTTP/2
    /// client always gets them; an HTTP/1.1 client only with `TE: trailers` and a chunked response).
    func upstreamResponseTrailers(_ trailers: HTTPHeaders) {
        guard !machine.isDone else { return }
        responseTrailers = trailers
    }

    /// The request's trailer fields (HTTP/1.1 chunked trailers, an HTTP/2 trailing HEADERS), just before
    /// `receiveEnd`: forwarded with the end of the request body (filtered by `TrailerFilter`).
    func receiveTrailers(_ trailers: HTTPHeaders) {
        guard !machine.isDone, !trailers.isEmpty else { return }
        requestTrailers = trailers
    }

    /// Whether the request's `TE` lists `trailers` (RFC 9110 §10.1.4); HTTP/2 requests always take trailers, and their
    /// `te` can only be `trailers` (RFC 9113 §8.2.2).
    static func acceptsTrailers(_ head: HTTPRequestHead) -> Bool {
        var found = false
        head.headers.forEachField { _, name, value in
            if !found, name.count == 2, HTTPSyntax.equalsLowercased(name, "te") { found = TrailerFilter.listsTrailers(value) }
        }
        return found
    }
}
