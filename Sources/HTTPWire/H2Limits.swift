/// Limits and protections of an `H2ServerSession` (docs/configuration.md `server.limits`, RFC 9113 §6.5.2, §10.5).
///
/// Every value is clamped into the range HTTP/2 allows; defaults follow nghttp2 and common servers.
/// Rate limits are token buckets: `burst` events are allowed at once, refilled at `burst` per window.
public struct H2Limits: Hashable, Sendable {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` we announce. A client that opens more before it has seen our
    /// SETTINGS gets `RST_STREAM(REFUSED_STREAM)` on the excess streams; one that ignores the ACKed value
    /// gets a connection error (nghttp2). Default 100.
    public var maxConcurrentStreams: Int
    /// `SETTINGS_INITIAL_WINDOW_SIZE` we announce: how many request-body bytes a client may send on one
    /// stream before the gateway has `consume`d (forwarded) them. Default 1 MiB.
    public var initialWindowSize: Int
    /// Receive window of the whole connection (raised from 65,535 with a WINDOW_UPDATE on stream 0 right
    /// after our SETTINGS). Bounds the request-body bytes buffered per connection. Default 4 MiB.
    public var connectionWindowSize: Int
    /// Maximum size of a request's header list, counted on RECEIVE as the HTTP/1.1 equivalent
    /// `name.count + value.count + 4` per field, pseudo-header fields included (so the same
    /// `max_header_bytes` means about the same thing on both protocols). One byte over: the stream is not
    /// delivered as a request, the delegate gets `streamExceededHeaderLimit` (answer 431 or reset).
    /// Also announced (advisory) as `SETTINGS_MAX_HEADER_LIST_SIZE` in RFC units (+32 per field).
    /// Default 16 KiB.
    public var maxHeaderListBytes: Int
    /// Maximum number of regular (non-pseudo) header fields of a request; one more behaves like
    /// `maxHeaderListBytes` exceeded. Default 100.
    public var maxHeaders: Int
    /// `SETTINGS_MAX_FRAME_SIZE` we announce (16,384…16,777,215). Default 16,384.
    public var maxFrameSize: Int
    /// nghttp2's incoming RST_STREAM token bucket (`nghttp2_option_set_stream_reset_rate_limit`,
    /// CVE-2023-44487 "Rapid Reset"): `streamResetBurst` tokens, `streamResetRatePerSecond` regenerated per
    /// second; when empty nghttp2 sends GOAWAY and the session finishes. Defaults 1000 and 33.
    public var streamResetBurst: Int
    /// See `streamResetBurst`.
    public var streamResetRatePerSecond: Int
    /// Maximum CONTINUATION frames after one HEADERS (`nghttp2_option_set_max_continuations`, the 2024
    /// "CONTINUATION flood"); more is a connection error. Default 8.
    public var maxContinuations: Int
    /// Counted by us (nghttp2 1.52 has no glitch limiter): non-ACK SETTINGS and PING frames allowed per
    /// `controlFrameWindowSeconds` (token bucket). Exceeded → GOAWAY(ENHANCE_YOUR_CALM), session finishes.
    /// The SETTINGS of the client preface counts. Default 100 per 10 s.
    public var maxControlFrames: Int
    /// See `maxControlFrames`.
    public var controlFrameWindowSeconds: Int
    /// Counted by us: protocol "glitches" allowed per `glitchWindowSeconds` (token bucket) before
    /// GOAWAY(ENHANCE_YOUR_CALM). A glitch is: a frame nghttp2 reports invalid (`on_invalid_frame_recv`),
    /// an invalid header field, a malformed request, a stream the client resets before our response was
    /// complete, an empty DATA frame without END_STREAM (on any stream, also one already closed). Default 500 per 10 s.
    public var maxGlitches: Int
    /// See `maxGlitches`.
    public var glitchWindowSeconds: Int
    /// `didDrainOutput` fires when a stream's buffered response bytes drop below this after having been
    /// at or above it. Default 64 KiB.
    public var outputLowWatermark: Int

    /// Creates limits; values are clamped to what HTTP/2 allows (windows ≤ 2^31−1, frame size in
    /// 16,384…16,777,215, counts ≥ 1).
    public init(
        maxConcurrentStreams: Int = 100,
        initialWindowSize: Int = 1 << 20,
        connectionWindowSize: Int = 4 << 20,
        maxHeaderListBytes: Int = 16 * 1024,
        maxHeaders: Int = 100,
        maxFrameSize: Int = 16_384,
        streamResetBurst: Int = 1000,
        streamResetRatePerSecond: Int = 33,
        maxContinuations: Int = 8,
        maxControlFrames: Int = 100,
        controlFrameWindowSeconds: Int = 10,
        maxGlitches: Int = 500,
        glitchWindowSeconds: Int = 10,
        outputLowWatermark: Int = 64 * 1024
    ) {
        let maxWindow = Int(Int32.max)
        self.maxConcurrentStreams = min(max(1, maxConcurrentStreams), maxWindow)
        self.initialWindowSize = min(max(0, initialWindowSize), maxWindow)
        self.connectionWindowSize = min(max(65_535, connectionWindowSize), maxWindow)
        self.maxHeaderListBytes = min(max(0, maxHeaderListBytes), 1 << 30)
        self.maxHeaders = min(max(0, maxHeaders), 1 << 20)
        self.maxFrameSize = min(max(16_384, maxFrameSize), 16_777_215)
        self.streamResetBurst = max(1, streamResetBurst)
        self.streamResetRatePerSecond = max(0, streamResetRatePerSecond)
        self.maxContinuations = max(0, maxContinuations)
        self.maxControlFrames = max(1, maxControlFrames)
        self.controlFrameWindowSeconds = max(1, controlFrameWindowSeconds)
        self.maxGlitches = max(1, maxGlitches)
        self.glitchWindowSeconds = max(1, glitchWindowSeconds)
        self.outputLowWatermark = max(1, outputLowWatermark)
    }

    /// Defaults with the header limits taken from the HTTP/1 parser limits (`max_header_bytes`,
    /// `max_headers`), so both protocols enforce the same configuration.
    public init(parserLimits: HTTPParserLimits) {
        self.init(maxHeaderListBytes: parserLimits.maxHeadBytes, maxHeaders: parserLimits.maxHeaders)
    }

    /// The defaults.
    public static let `default` = H2Limits()
}
