import EventLoop

/// A request's id (`X-Request-Id`, docs/behaviour.md): the client's valid one, or 128 random bits. The bits' 32 hex
/// digits are written straight into the upstream request head and the response head (`append(to:)`, `withBytes`); their
/// text is made only when something reads `string` (an access-log line, an error body), so a proxied request with access
/// logs off makes no string for it.
public struct RequestID {
    private let client: String?
    private let bits: (UInt64, UInt64)

    public init(client: String) {
        self.client = client
        bits = (0, 0)
    }

    public init(bits: (UInt64, UInt64)) {
        client = nil
        self.bits = bits
    }

    /// The id as text: the client's, or the bits' 32 lower-case hex digits.
    public var string: String { client ?? RequestIdGenerator.string(bits) }

    /// Calls `body` with the id's bytes (the same bytes as `string`; the bits' digits on the stack, no string).
    public func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        if var client { return client.withUTF8 { body(UnsafeRawBufferPointer($0)) } }
        var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &digits) { raw in
            RequestIdGenerator.write(bits, to: raw.baseAddress!.assumingMemoryBound(to: UInt8.self))
            return body(UnsafeRawBufferPointer(raw))
        }
    }

    /// Appends the id's bytes to `out` (the same bytes as `string`).
    public func append(to out: IOBuffer) {
        if let client { out.append(client) } else { RequestIdGenerator.append(bits, to: out) }
    }
}
