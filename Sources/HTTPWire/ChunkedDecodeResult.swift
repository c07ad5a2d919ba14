/// The outcome of one `ChunkedDecoder.decode(_:onData:)` call.
public enum ChunkedDecodeResult: Hashable, Sendable {
    /// All `n` input bytes were consumed (always the whole input) and the body is not finished: call again
    /// with the next bytes only (the decoder keeps its state; consumed bytes are never passed again).
    case consumed(Int)
    /// The last chunk and the trailer section were read; the body ended after `consumed` bytes of this
    /// input. Bytes after it belong to the next message.
    case done(consumed: Int)
    /// The chunked body is malformed or over a limit; the connection must be closed.
    case failure(HTTPParseError)
}
