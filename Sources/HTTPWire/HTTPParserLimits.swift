/// Size limits applied by the HTTP/1.x head parsers and the chunked decoder while bytes arrive
/// (docs/configuration.md `server.limits`). A limit is enforced as soon as one byte beyond it is seen, never after
/// buffering the whole message.
public struct HTTPParserLimits: Hashable, Sendable {
    /// Maximum size in bytes of a head: the request (or status) line, all field lines and the terminating
    /// empty line, each with its CRLF. Leading empty lines skipped before a request line do not count.
    /// A head of exactly this size is accepted; one byte more fails with `431`. Default 16 KiB.
    /// Also bounds the trailer section of a chunked body.
    public var maxHeadBytes: Int
    /// Maximum number of header (or trailer) field lines; one more fails with `431`. Default 100.
    public var maxHeaders: Int
    /// Maximum length of the request line without its CRLF; one more byte fails with `414` even before the
    /// rest of the head arrives. Never more than `maxHeadBytes` (see `effectiveRequestLineBytes`).
    /// For responses it bounds the status line (failure `431`, reason `status_line_too_long`). Default 8 KiB.
    public var maxRequestLineBytes: Int
    /// Maximum number of empty lines (CRLF) skipped before a request line (RFC 9112 §2.2); one more is `400`.
    /// Default 4.
    public var maxLeadingEmptyLines: Int
    /// Maximum bytes of chunk extensions on one chunk-size line (RFC 9112 §7.1.1); one more is `400`.
    /// Default 4 KiB.
    public var maxChunkExtensionBytes: Int

    /// Creates limits; negative values are treated as zero and `maxHeadBytes` is capped at 1 GiB so that
    /// field offsets always fit `Int32`.
    public init(
        maxHeadBytes: Int = 16 * 1024,
        maxHeaders: Int = 100,
        maxRequestLineBytes: Int = 8 * 1024,
        maxLeadingEmptyLines: Int = 4,
        maxChunkExtensionBytes: Int = 4 * 1024
    ) {
        self.maxHeadBytes = min(max(0, maxHeadBytes), 1 << 30)
        self.maxHeaders = max(0, maxHeaders)
        self.maxRequestLineBytes = max(0, maxRequestLineBytes)
        self.maxLeadingEmptyLines = max(0, maxLeadingEmptyLines)
        self.maxChunkExtensionBytes = max(0, maxChunkExtensionBytes)
    }

    /// The defaults of docs/configuration.md: 16 KiB head, 100 fields, 8 KiB request line.
    public static let `default` = HTTPParserLimits()

    /// `min(maxRequestLineBytes, maxHeadBytes)`: the request-line bound actually enforced.
    public var effectiveRequestLineBytes: Int { min(maxRequestLineBytes, maxHeadBytes) }
}
