import CNghttp2
#if canImport(Glibc)
import Glibc
#endif

/// The server side of one HTTP/2 connection (RFC 9113) over nghttp2: bytes in, events out. It never
/// touches a file descriptor. Confined to one thread; not `Sendable`.
///
/// Driving it (the gateway's connection):
/// 1. Feed every chunk read from the socket to `receive(_:)`; then call `send(...)` and write what it
///    produces. Call `send(...)` also after any `sendResponseHead`/`sendData`/`resetStream`/`consume`/
///    `goAway` made outside a delegate callback. On `.closeConnection`, flush and close.
/// 2. After flushing, close the connection when `isFinished` (neither side has anything more to say).
/// 3. Flow control of request bodies is manual: body bytes count against the client's windows until
///    `consume(streamID:bytes:)` says they were forwarded, so a slow upstream back-pressures the client.
/// 4. Response bodies are copied into a per-stream buffer (`sendData`) drained as the client's windows
///    allow; stop reading an upstream while `bufferedBytes(streamID:)` is above your bound and resume on
///    `didDrainOutput`. Give `send(maxBytes:)` a bound while the socket's own write buffer is full.
///
/// Request heads (`HTTPRequestHead`) built from HTTP/2 requests:
/// - `method` from `:method`, `target` from `:path` (non-empty, `0x21–0x7E`, starting with `/`, or `*`
///   for OPTIONS), `versionMinor` = 1 (the head is forwarded as HTTP/1.1 semantics), `keepAlive` = true,
///   `connectionTokens` = [] (connection-specific fields are refused, RFC 9113 §8.2.2).
/// - `host` = `:authority`, else the `host` field; a request with neither, with both but different
///   (ASCII case-insensitive), or with userinfo (`@`) in `:authority` is malformed. When there is no `host`
///   field, `host: <:authority>` is appended to `headers`.
/// - `headers`: the regular fields in arrival order as `name: value\r\n` lines (synthetic bytes); several
///   `cookie` fields are joined with `"; "` into one field at the end (RFC 9113 §8.2.3).
/// - `framing`: `.contentLength(n)` when `content-length` is present (held against the DATA received: more, or less
///   at the end of the stream, resets the stream with PROTOCOL_ERROR, RFC 9113 §8.1.1); otherwise `.chunked` when
///   the HEADERS did not end the stream — meaning "a body of unknown length follows" (forward it with
///   chunked coding or reframe); `.none` when it did.
/// - `expectContinue` for `expect: 100-continue` (answer with `sendContinue(streamID:)` if you wish).
/// - Malformed requests (RFC 9113 §8.1.1, §8.2, §8.3) are reset with PROTOCOL_ERROR and never reported:
///   upper-case or invalid names, invalid values (a control byte but HTAB, leading/trailing whitespace),
///   connection-specific fields (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`,
///   `upgrade`), `te` other than `trailers`, unknown/duplicate/misplaced/empty pseudo-header fields, a missing
///   `:method`/`:scheme`/`:path`, a `:scheme` that is not a URI scheme, an `:authority` or `host` with a byte
///   outside RFC 3986's authority, a repeated `content-length`, or one other than 0 on HEADERS that end the stream;
///   a trailer section without END_STREAM or with a pseudo, upper-case or connection-specific field. These are the
///   session's own checks: nghttp2's HTTP messaging is turned off (`nghttp2_option_set_no_http_messaging`), as it
///   checked every value byte by byte (about 6,000 instructions per request with an App Check token) before the
///   session checked the same rules again. `CONNECT` (and extended CONNECT) is refused with
///   RST_STREAM(REFUSED_STREAM): the gateway is not a tunnel. Request trailers are delivered by `didReceiveTrailers`.
public final class H2ServerSession {
    /// The client connection preface, `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n` (RFC 9113 §3.4).
    public static let clientPreface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Whether `bytes` (the first bytes of a plain-text connection) start with the client preface.
    public static func matchPreface(_ bytes: UnsafeRawBufferPointer) -> H2PrefaceMatch {
        let n = min(bytes.count, clientPreface.count)
        for i in 0..<n where bytes[i] != clientPreface[i] { return .mismatch }
        return n == clientPreface.count ? .match : .needMoreBytes
    }

    /// The limits this session enforces.
    public let limits: H2Limits
    /// Receives the events. Held weakly: the connection owning the session is normally the delegate.
    public weak var delegate: H2SessionDelegate?

    var session: OpaquePointer?
    var streams = StreamTable<H2Stream>()
    /// The pseudo-fields' values of the header block being read (`H2Stream.method` etc. are ranges in it), reused from
    /// block to block, and the stream that block belongs to.
    var pseudoBytes: [UInt8] = []
    var pseudoOwner: Int32 = 0
    var controlFrames: H2TokenBucket
    var glitches: H2TokenBucket
    /// The client's frame headers, read beside nghttp2 for the empty DATA frames it drops silently.
    var frameScan = H2FrameHeaderScan()
    var drained: [Int32] = []
    /// Set when the session was terminated (by us or nghttp2); `receive` then refuses input.
    var closeReason: String?
    var errorGoAwaySent = false
    var shutdown: ShutdownState = .none
    /// Monotonic clock in nanoseconds: the owner's (the gateway passes its loop's batch time, so a connection reads
    /// one clock), this process's by default; replaceable by tests.
    var now: () -> UInt64
    /// Response bytes queued over all streams and not yet handed to `send` (see `bufferedBytes(streamID:)`).
    public internal(set) var totalBufferedBytes = 0
    /// Asked each time the client resets a stream whose response was not complete, beside this connection's own
    /// limits: nil to go on, or a reason to end the session with GOAWAY(ENHANCE_YOUR_CALM) (the server's budget
    /// across connections, CVE-2023-44487 with reconnects).
    public var clientResetHook: (() -> String?)?

    enum ShutdownState { case none, noticeSent, finalSent }
    static let shutdownPing: [UInt8] = Array("gwdrain!".utf8)

    /// Creates the session and queues our SETTINGS and the connection WINDOW_UPDATE (call `send`). `clock`: monotonic
    /// nanoseconds for the control-frame and glitch budgets (read when such a frame arrives, never per request).
    /// `delegate` may be set after `init` (an owner that is the delegate makes the session in its own `init`), before
    /// the first `receive`.
    public init(limits: H2Limits = .default, delegate: H2SessionDelegate?,
                clock: @escaping () -> UInt64 = H2ServerSession.monotonicNanoseconds) {
        self.limits = limits
        self.delegate = delegate
        now = clock
        let start = clock()
        controlFrames = H2TokenBucket(capacity: limits.maxControlFrames, windowSeconds: limits.controlFrameWindowSeconds, now: start)
        glitches = H2TokenBucket(capacity: limits.maxGlitches, windowSeconds: limits.glitchWindowSeconds, now: start)

        var callbacks: OpaquePointer?
        var option: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, nghttp2_option_new(&option) == 0 else {
            nghttp2_session_callbacks_del(callbacks)
            closeReason = "nghttp2_init_failed"
            return
        }
        defer {
            nghttp2_session_callbacks_del(callbacks)
            nghttp2_option_del(option)
        }
        H2ServerSession.install(callbacks)
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_no_closed_streams(option, 1)
        nghttp2_option_set_stream_reset_rate_limit(
            option, UInt64(limits.streamResetBurst), UInt64(limits.streamResetRatePerSecond))
        nghttp2_option_set_max_continuations(option, limits.maxContinuations)
        // RFC 9113 §8's checks of requests are the session's own (`onHeader`, `requestHead`, `onTrailer`, `onData`),
        // a superset of nghttp2's; its HTTP messaging would only run them twice. (It also parsed RFC 9218 `priority`
        // fields for scheduling, which the gateway does not ask for.)
        nghttp2_option_set_no_http_messaging(option, 1)

        var created: OpaquePointer?
        let rv = nghttp2_session_server_new2(&created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        guard rv == 0, let created else {
            closeReason = "nghttp2_init_failed"
            return
        }
        session = created

        // RFC 9113 §6.5.2 MAX_HEADER_LIST_SIZE counts name + value + 32 per field.
        let advertisedHeaderList = min(
            UInt64(limits.maxHeaderListBytes) + 28 * UInt64(limits.maxHeaders + 5), UInt64(UInt32.max))
        var settings: [nghttp2_settings_entry] = [
            entry(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, UInt32(limits.maxConcurrentStreams)),
            entry(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, UInt32(limits.initialWindowSize)),
            entry(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, UInt32(advertisedHeaderList)),
            entry(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1),
        ]
        if limits.maxFrameSize != 16_384 {
            settings.append(entry(NGHTTP2_SETTINGS_MAX_FRAME_SIZE, UInt32(limits.maxFrameSize)))
        }
        var ok = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), settings, settings.count) == 0
        if limits.connectionWindowSize > 65_535 {
            ok = ok && nghttp2_session_set_local_window_size(
                created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(limits.connectionWindowSize)) == 0
        }
        if !ok { closeReason = "nghttp2_init_failed" }
    }

    deinit {
        nghttp2_session_del(session)
    }

    // MARK: - Input and output

    /// Feeds bytes read from the connection. Delegate events are delivered before this returns.
    public func receive(_ bytes: UnsafeRawBufferPointer) -> H2Status {
        if let closeReason { return .closeConnection(reason: closeReason) }
        if errorGoAwaySent { return .closeConnection(reason: "goaway_sent") }
        guard let session else { return .closeConnection(reason: "nghttp2_init_failed") }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .ok }
        // Empty DATA frames count as glitches whatever their stream (CVE-2019-9518); a flood ends the session before
        // nghttp2 reads the rest.
        for _ in 0..<frameScan.scan(bytes) where closeReason == nil { glitch("empty_data") }
        if let closeReason { return .closeConnection(reason: closeReason) }
        let rv = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rv < 0 {
            terminate(H2ErrorCode.forReceiveError(rv), reason: H2ServerSession.reason(forLibraryError: Int32(rv)))
        }
        if let closeReason { return .closeConnection(reason: closeReason) }
        return .ok
    }

    /// Serialises pending frames and hands them to `sink` (each buffer valid only during the call), until
    /// nghttp2 has nothing more or about `maxBytes` were produced (the last frame may exceed the bound by
    /// up to one frame). Returns the number of bytes produced. Response bytes buffered by `sendData` are
    /// drained here as flow control allows.
    @discardableResult
    public func send(maxBytes: Int = .max, _ sink: (UnsafeRawBufferPointer) -> Void) -> Int {
        guard let session else { return 0 }
        var total = 0
        while true {
            while total < maxBytes {
                var pointer: UnsafePointer<UInt8>?
                let n = nghttp2_session_mem_send(session, &pointer)
                if n < 0 {
                    closeReason = closeReason ?? H2ServerSession.reason(forLibraryError: Int32(n))
                    errorGoAwaySent = true
                    return total
                }
                guard n > 0, let pointer else { break }
                sink(UnsafeRawBufferPointer(start: pointer, count: n))
                total += n
            }
            if drained.isEmpty { break }
            let ids = drained
            drained.removeAll(keepingCapacity: true)
            for id in ids where streams[id] != nil {
                delegate?.h2(self, didDrainOutput: id)
            }
            if total >= maxBytes { break }
        }
        return total
    }

    /// `send(maxBytes:_:)` appending to `buffer`.
    @discardableResult
    public func send(into buffer: inout [UInt8], maxBytes: Int = .max) -> Int {
        send(maxBytes: maxBytes) { buffer.append(contentsOf: $0) }
    }

    /// Whether nghttp2 wants to read more frames (false after GOAWAY exchange with no active streams, or
    /// once the session was terminated).
    public var wantsRead: Bool {
        guard let session, closeReason == nil, !errorGoAwaySent else { return false }
        return nghttp2_session_want_read(session) != 0
    }

    /// Whether frames are waiting to be produced by `send`.
    public var wantsWrite: Bool {
        guard let session, !errorGoAwaySent else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    /// Nothing more will be read or written: flush what `send` produced and close the connection.
    public var isFinished: Bool {
        guard let session else { return true }
        if errorGoAwaySent { return true }
        return nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }

    /// Why the session was terminated, if it was (snake_case, safe to log).
    public var terminationReason: String? { closeReason }

    /// Number of streams with state in this session (open or half-closed).
    public var activeStreamCount: Int { streams.count }

    /// Ends the session without a goodbye (the connection is closing): every stream the delegate knows of
    /// gets `didResetStream(.cancel)`, then nghttp2's state is freed. Later calls do nothing. (Closing the
    /// connection without this is fine too; the delegate then cleans up its streams itself.)
    public func close() {
        guard let session else { return }
        closeReason = closeReason ?? "closed"
        let open = streams.values.filter(\.announced).map(\.id).sorted()
        streams.removeAll()
        totalBufferedBytes = 0
        self.session = nil
        nghttp2_session_del(session)
        for id in open { delegate?.h2(self, didResetStream: id, errorCode: .cancel) }
    }
}

@inline(__always)
private func entry(_ id: nghttp2_settings_id, _ value: UInt32) -> nghttp2_settings_entry {
    nghttp2_settings_entry(settings_id: Int32(id.rawValue), value: value)
}
