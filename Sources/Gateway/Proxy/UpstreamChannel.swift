import ProxyCore
import HTTPWire

/// The exchange's side of the upstream seam: what an `Exchange` tells the upstream it was given by its pool. One HTTP/1.1
/// connection (`UpstreamConnection`, `upstreams.<name>.protocol: http1`) or one stream of a multiplexed HTTP/2
/// connection (`H2UpstreamStream`, `protocol: h2`); the other direction is `UpstreamOwner`. The exchange never asks
/// which (but for the head's framing: HTTP/1.1 text, or HTTP/2 field records when its pool gives it an HTTP/2 stream;
/// the same fields either way, `RequestHeadWriter`): it writes the head, the body parts, their end, and hears the response
/// back as an `HTTPResponseHead`, body parts and trailers. All calls happen on the loop.
protocol UpstreamChannel: AnyObject {
    /// The route's `stream_idle_timeout` in nanoseconds, 0 when it sets none (see `UpstreamConnection`).
    var streamIdleTimeout: UInt64 { get set }
    /// Request bytes taken and not yet written to the upstream (the exchange pauses its client above
    /// `Backpressure.highWater` and resumes on `UpstreamOwner.upstreamDrained`).
    var requestBacklog: Int { get }
    /// The request head as HTTP/1.1 bytes (`RequestHeadWriter.write`'s output; an HTTP/2 stream translates it).
    func sendHead(_ head: UnsafeRawBufferPointer)
    /// The request head as HTTP/2 field records (`RequestHeadWriter.writeH2`'s output), which the exchange writes when
    /// its pool gives it an HTTP/2 stream: never given to an HTTP/1.1 connection.
    func sendH2Head(_ records: UnsafeRawBufferPointer, _ draft: H2RequestHeadSink.Draft)
    /// Request body bytes; `chunked`: the head said `Transfer-Encoding: chunked` (HTTP/1.1 frames them as a chunk).
    func sendBody(_ bytes: UnsafeRawBufferPointer, chunked: Bool)
    /// The request is complete, with its trailer fields if it had any (already filtered by `TrailerFilter`); the
    /// response timeout starts.
    func endRequest(chunked: Bool, trailers: HTTPHeaders?)
    /// The exchange no longer wants this request: an HTTP/1.1 connection closes, an HTTP/2 stream is reset
    /// (RST_STREAM(CANCEL)), never its connection.
    func abandon()
    /// The client's send buffer drained: the upstream may deliver more of the response.
    func clientDrained()
}

extension UpstreamConnection: UpstreamChannel {
    var requestBacklog: Int { outBuf.readableCount }

    func sendHead(_ head: UnsafeRawBufferPointer) { send(head) }

    /// The exchange writes HTTP/2 records only for a pool that gives it an HTTP/2 stream (`UpstreamPool.acquire`).
    func sendH2Head(_ records: UnsafeRawBufferPointer, _ draft: H2RequestHeadSink.Draft) {
        preconditionFailure("UpstreamConnection: an HTTP/1.1 connection was given an HTTP/2 request head")
    }

    func sendBody(_ bytes: UnsafeRawBufferPointer, chunked: Bool) {
        if chunked { sendChunk(bytes) } else { send(bytes) }
    }

    /// Request trailers are not sent to an HTTP/1.1 upstream (docs/behaviour.md "HTTP/2 upstreams and trailers": they
    /// travel only with `TE: trailers`, which is forwarded to `h2` upstreams alone).
    func endRequest(chunked: Bool, trailers: HTTPHeaders?) {
        if chunked { sendLastChunk() }
        requestComplete()
    }
}
