import CNghttp2
#if canImport(Glibc)
import Glibc
#endif

/// The client side of one HTTP/2 connection to an upstream (RFC 9113) over nghttp2: bytes in, events out, output
/// buffered. It never touches a file descriptor (the gateway's `H2UpstreamConnection` drives it). Confined to one
/// thread; not `Sendable`. Prior knowledge (h2c) or ALPN `h2`: the connection preface is the first thing `send` gives.
///
/// Driving it:
/// 1. `submitRequest` opens a stream (HEADERS); its body goes through `sendData`, ended by `endStream` or by
///    `sendTrailers`. Request bytes are copied into a per-stream buffer drained as the server's windows allow; stop
///    queueing while `bufferedBytes(streamID:)` is above your bound and resume on `didDrainOutput`.
/// 2. Feed every chunk read from the socket to `receive(_:)`, then write what `send(...)` produces (call it also after
///    any submit made outside a delegate callback). On `.closeConnection`, flush and close.
/// 3. Flow control of response bodies is manual per stream: DATA counts against the stream's receive window
///    (`H2Limits.initialWindowSize`, the per-stream memory bound) until `consume(streamID:bytes:)`; the connection
///    window is reopened as bytes arrive, so one slow stream never stalls the others.
///
/// Bounds against a hostile server (each one ends the stream or the session, never an unbounded buffer):
/// - response heads and trailers: `maxHeaderListBytes` (counted as `name + value + 4`, pseudo fields included) and
///   `maxHeaders`; one byte over resets the stream (`didFailStream(.malformed)`); at most `maxContinuations`
///   CONTINUATION frames per block (a connection error);
/// - interim 1xx heads: at most 8 per stream; a 101, or a 1xx with END_STREAM, is malformed;
/// - non-ACK SETTINGS and PING: `maxControlFrames` per `controlFrameWindowSeconds` (GOAWAY(ENHANCE_YOUR_CALM));
/// - DATA beyond the windows we granted, bad frames, bad HPACK: nghttp2's connection errors (GOAWAY, then every
///   open stream gets `didFailStream(.connectionClosed)`).
/// Malformed responses (RFC 9113 §8.1.1) are stream errors: the stream is reset with PROTOCOL_ERROR and reported
/// `didFailStream(.malformed)`, and nothing of the malformed part is delivered. The checks are the session's own
/// (nghttp2's HTTP messaging is off, `nghttp2_option_set_no_http_messaging`: it checked every value byte by byte): a
/// `:status` of three digits, once, first, in a head only, and no other pseudo field; names lower-case tokens; values
/// field values without leading or trailing whitespace (a field nghttp2 would only have dropped is malformed too); no
/// connection-specific field, `te` only as `trailers`; one `content-length`, none in a 1xx, only `0` in a 204 (dropped);
/// DATA held against `content-length` (more: reset before the excess is delivered; less at END_STREAM: reset), none
/// after a head that has no content (to HEAD, a 204, a 304) or between an interim head and the final one; trailers
/// with END_STREAM and no pseudo field.
public final class H2ClientSession {
    /// The limits this session enforces (the header bounds apply to response heads and trailers).
    public let limits: H2Limits
    /// Receives the events. Held weakly: the connection owning the session is normally the delegate.
    public weak var delegate: H2ClientSessionDelegate?

    var session: OpaquePointer?
    var streams = StreamTable<H2ClientStream>()
    var controlFrames: H2TokenBucket
    var drained: [Int32] = []
    /// Set when the session was terminated (by us or nghttp2); `receive` then refuses input.
    var closeReason: String?
    var fatal = false
    /// The server's GOAWAY arrived: no new stream.
    public internal(set) var goAwayReceived = false
    /// The header block being received, as `name: value\r\n` lines and their ranges (`appendField`): a HEADERS frame
    /// and its CONTINUATION frames come in a row (RFC 9113 §6.10), so one buffer serves every stream. Kept from block to
    /// block (freed past 16 KiB); at most `maxHeaderListBytes` (a field past it is malformed before it is appended).
    var blockBytes: UnsafeMutableRawPointer?
    var blockCapacity = 0
    var blockCount = 0
    var blockFields: [HTTPHeaderField] = []
    /// The records of request heads submitted without copies (`H2RequestFields`): nghttp2 reads them when it
    /// serialises their HEADERS frames, so each is held until its frame was sent or given up (`onFrameSent`,
    /// `onFrameNotSent`), or the nghttp2 session is deleted. A few at a time (those submitted since the last `send`).
    var heldHeads: [(id: Int32, bytes: [UInt8])] = []
    /// Request bytes queued over all streams and not yet handed to `send`.
    public internal(set) var totalBufferedBytes = 0
    /// Monotonic clock in nanoseconds: the owner's (the gateway passes its loop's batch time), this process's by
    /// default; replaceable by tests.
    var now: () -> UInt64

    /// Creates the session and queues the connection preface, our SETTINGS and the connection WINDOW_UPDATE (call
    /// `send`). `assumedMaxConcurrent`: streams sent at most before the server's SETTINGS arrive (default 100, RFC 9113
    /// §6.5.2's recommended minimum; capped by `limits.maxConcurrentStreams`).
    /// `clock`: monotonic nanoseconds for the control-frame budget. `delegate` may be nil and set before the first
    /// `receive` (an owner that is itself the delegate builds the session in its own `init`).
    public init(limits: H2Limits = .default, delegate: H2ClientSessionDelegate?, assumedMaxConcurrent: Int = 100,
                clock: @escaping () -> UInt64 = H2ClientSession.monotonicNanoseconds) {
        self.limits = limits
        self.delegate = delegate
        now = clock
        controlFrames = H2TokenBucket(capacity: limits.maxControlFrames, windowSeconds: limits.controlFrameWindowSeconds,
                                      now: clock())
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
        H2ClientSession.install(callbacks)
        nghttp2_option_set_no_auto_window_update(option, 1)
        nghttp2_option_set_no_closed_streams(option, 1)
        nghttp2_option_set_max_continuations(option, limits.maxContinuations)
        // RFC 9113 §8's checks of responses are the session's own (`onHeader`, `onFrameReceived`, `onData`); nghttp2's
        // HTTP messaging checked every value byte by byte before the session checked the same rules again.
        nghttp2_option_set_no_http_messaging(option, 1)
        // Until the server's SETTINGS arrive, open no more than this many streams (RFC 9113 §6.5.2 recommends ≥ 100).
        nghttp2_option_set_peer_max_concurrent_streams(
            option, UInt32(max(1, min(limits.maxConcurrentStreams, assumedMaxConcurrent))))
        var created: OpaquePointer?
        guard nghttp2_session_client_new2(&created, callbacks, Unmanaged.passUnretained(self).toOpaque(), option) == 0,
              let created else {
            closeReason = "nghttp2_init_failed"
            return
        }
        session = created
        let headerList = min(UInt64(limits.maxHeaderListBytes) + 28 * UInt64(limits.maxHeaders + 5), UInt64(UInt32.max))
        let settings: [nghttp2_settings_entry] = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                                   value: UInt32(limits.initialWindowSize)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                                   value: UInt32(headerList)),
        ]
        var ok = nghttp2_submit_settings(created, UInt8(NGHTTP2_FLAG_NONE.rawValue), settings, settings.count) == 0
        if limits.connectionWindowSize > 65_535 {
            ok = ok && nghttp2_session_set_local_window_size(
                created, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(limits.connectionWindowSize)) == 0
        }
        if !ok { closeReason = "nghttp2_init_failed" }
    }

    deinit {
        nghttp2_session_del(session)
        blockBytes?.deallocate()
    }

    // MARK: - Input and output

    /// Feeds bytes read from the connection. Delegate events are delivered before this returns. A connection error
    /// nghttp2 answers itself (a malformed frame) shows once its GOAWAY went out: `send` then sets
    /// `terminationReason` and `isFinished`.
    public func receive(_ bytes: UnsafeRawBufferPointer) -> H2Status {
        if let closeReason { return .closeConnection(reason: closeReason) }
        guard let session else { return .closeConnection(reason: "nghttp2_init_failed") }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .ok }
        let rv = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rv < 0 {
            terminate(H2ErrorCode.forReceiveError(rv), reason: H2ServerSession.reason(forLibraryError: Int32(rv)))
        }
        if let closeReason { return .closeConnection(reason: closeReason) }
        return .ok
    }

    /// Serialises pending frames and hands them to `sink` (each buffer valid only during the call), until nghttp2 has
    /// nothing more or about `maxBytes` were produced. Returns the number of bytes produced.
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
                    fatal = true
                    return total
                }
                guard n > 0, let pointer else { break }
                sink(UnsafeRawBufferPointer(start: pointer, count: n))
                total += n
            }
            if drained.isEmpty { break }
            let ids = drained
            drained.removeAll(keepingCapacity: true)
            for id in ids where streams[id] != nil { delegate?.h2(self, didDrainOutput: id) }
            if total >= maxBytes { break }
        }
        return total
    }

    /// `send(maxBytes:_:)` appending to `buffer`.
    @discardableResult
    public func send(into buffer: inout [UInt8], maxBytes: Int = .max) -> Int {
        send(maxBytes: maxBytes) { buffer.append(contentsOf: $0) }
    }

    /// Whether frames are waiting to be produced by `send`.
    public var wantsWrite: Bool {
        guard let session, !fatal else { return false }
        return nghttp2_session_want_write(session) != 0
    }

    /// Nothing more will be read or written: flush what `send` produced and close the connection.
    public var isFinished: Bool {
        guard let session, !fatal else { return true }
        return nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0
    }

    /// Why the session was terminated, if it was (snake_case, safe to log).
    public var terminationReason: String? { closeReason }

    /// Streams opened and not yet ended.
    public var activeStreamCount: Int { streams.count }

    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` (100 until its SETTINGS arrive; capped at
    /// `H2Limits.maxConcurrentStreams`).
    public var remoteMaxConcurrentStreams: Int {
        guard let session else { return 0 }
        let value = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        return min(value, limits.maxConcurrentStreams)
    }

    /// Whether a new stream may be opened now: the session is alive, no GOAWAY came, stream ids are left and the
    /// server's concurrency limit is not reached.
    public var canOpenStream: Bool {
        guard let session, closeReason == nil, !goAwayReceived else { return false }
        return nghttp2_session_get_next_stream_id(session) < UInt32(Int32.max - 2)
            && streams.count < remoteMaxConcurrentStreams
    }

    // MARK: - Requests

    /// Opens a stream with the request head: `:method`, `:scheme`, `:authority`, `:path`, then `headers` (built with
    /// `H2HeaderList`, which drops connection-specific fields; add `te: trailers` with `addTETrailers`). With
    /// `endStream` false the body follows through `sendData`/`sendTrailers`. Returns the stream id, or nil when no
    /// stream can be opened (session over, GOAWAY received, ids exhausted).
    public func submitRequest(method: String, scheme: String, authority: String, path: String, headers: H2HeaderList,
                              endStream: Bool) -> Int32? {
        guard let session, closeReason == nil, !goAwayReceived,
              nghttp2_session_get_next_stream_id(session) < UInt32(Int32.max - 2) else { return nil }
        let pseudo = [(":method", method), (":scheme", scheme), (":authority", authority), (":path", path)]
        return headers.withNV(pseudo: pseudo) { submit(session, $0, endStream: endStream) }
    }

    /// Opens a stream with a request head the gateway wrote as HTTP/1.1 (`H2ClientRequestHead`: `:method`, `:path` and
    /// `:authority` from it, `defaultAuthority` when it has no `Host`), ending the stream at once when it has no body
    /// (`head.endStream`); otherwise the body follows through `sendData`/`sendTrailers`. Returns the stream id, or nil
    /// when no stream can be opened (session over, GOAWAY received, ids exhausted).
    public func submitRequest(_ head: H2ClientRequestHead, scheme: String, defaultAuthority: @autoclosure () -> String) -> Int32? {
        guard let session, closeReason == nil, !goAwayReceived,
              nghttp2_session_get_next_stream_id(session) < UInt32(Int32.max - 2) else { return nil }
        return head.withNV(scheme: scheme, defaultAuthority: defaultAuthority) {
            submit(session, $0, endStream: head.endStream)
        }
    }

    /// Opens a stream with a request head written as HTTP/2 field records (`H2RequestFields`: the gateway's writer for
    /// an `h2` upstream), as `submitRequest(_:scheme:defaultAuthority:)` does for one written as HTTP/1.1.
    public func submitRequest(_ head: H2RequestFields, scheme: String, defaultAuthority: @autoclosure () -> String) -> Int32? {
        guard let session, closeReason == nil, !goAwayReceived,
              nghttp2_session_get_next_stream_id(session) < UInt32(Int32.max - 2) else { return nil }
        let id = head.withNV(scheme: scheme, defaultAuthority: defaultAuthority) {
            submit(session, $0, endStream: head.endStream)
        }
        // nghttp2 points into the records (not copied): they stay until the HEADERS frame is sent (the same storage,
        // no copy of the array).
        if let id { heldHeads.append((id, head.bytes)) }
        return id
    }

    /// The HEADERS frame of `streamID` was sent or given up: nghttp2 reads its names and values no more.
    func releaseHead(_ streamID: Int32) {
        guard let i = heldHeads.firstIndex(where: { $0.id == streamID }) else { return }
        heldHeads.remove(at: i)
    }

    private func submit(_ session: OpaquePointer, _ nva: UnsafeBufferPointer<nghttp2_nv>, endStream: Bool) -> Int32? {
        let id: Int32
        if endStream {
            id = nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, nil, nil)
        } else {
            var provider = nghttp2_data_provider()
            provider.source.ptr = nil
            provider.read_callback = { _, streamID, buffer, length, flags, _, user in
                guard let user else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                return Unmanaged<H2ClientSession>.fromOpaque(user)._withUnsafeGuaranteedRef {
                    $0.readData(streamID, buffer, length, flags)
                }
            }
            id = nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, &provider, nil)
        }
        guard id > 0 else { return nil }
        let stream = H2ClientStream(id: id)
        stream.endQueued = endStream
        stream.headRequest = Self.isHeadRequest(nva)
        streams[id] = stream
        return id
    }

    /// Whether the request's `:method` is `HEAD` (the pseudo fields come first; every submission puts `:method` first).
    private static func isHeadRequest(_ nva: UnsafeBufferPointer<nghttp2_nv>) -> Bool {
        for nv in nva {
            guard nv.namelen > 0, nv.name[0] == UInt8(ascii: ":") else { return false }
            guard nv.namelen == 7, nv.name[1] == UInt8(ascii: "m") else { continue }
            return nv.valuelen == 4 && nv.value[0] == UInt8(ascii: "H") && nv.value[1] == UInt8(ascii: "E")
                && nv.value[2] == UInt8(ascii: "A") && nv.value[3] == UInt8(ascii: "D")
        }
        return false
    }

    /// Queues request body bytes of `streamID` (copied); `endStream` ends the request after them. False when the stream
    /// is gone or its request already ended.
    @discardableResult
    public func sendData(streamID: Int32, _ bytes: UnsafeRawBufferPointer, endStream: Bool) -> Bool {
        guard let session, let stream = streams[streamID], !stream.endQueued else { return false }
        stream.out.appendBytes(bytes)
        totalBufferedBytes += bytes.count
        if endStream { stream.endQueued = true }
        if stream.bufferedBytes >= limits.outputLowWatermark { stream.aboveLowWatermark = true }
        if stream.deferred, stream.bufferedBytes > 0 || endStream {
            stream.deferred = false
            nghttp2_session_resume_data(session, streamID)
        }
        return true
    }

    /// Ends the request of `streamID` with trailer fields (a trailing HEADERS frame with END_STREAM, sent after the
    /// body queued so far; RFC 9113 §8.1). An empty list ends it with an empty DATA frame instead.
    @discardableResult
    public func sendTrailers(streamID: Int32, _ trailers: H2HeaderList) -> Bool {
        guard !trailers.isEmpty else { return sendData(streamID: streamID, UnsafeRawBufferPointer(start: nil, count: 0), endStream: true) }
        guard let session, let stream = streams[streamID], !stream.endQueued else { return false }
        stream.trailers = trailers
        stream.endQueued = true
        if stream.deferred {
            stream.deferred = false
            nghttp2_session_resume_data(session, streamID)
        }
        return true
    }

    /// Request bytes queued for `streamID` and not yet handed to `send` (0 for unknown streams).
    public func bufferedBytes(streamID: Int32) -> Int { streams[streamID]?.bufferedBytes ?? 0 }

    /// Says that `bytes` response body bytes of `streamID` were taken by the client side: the stream's window opens
    /// again (WINDOW_UPDATE once half of it was consumed). Unknown streams are ignored.
    public func consume(streamID: Int32, bytes: Int) {
        guard let session, bytes > 0, streams[streamID] != nil else { return }
        nghttp2_session_consume_stream(session, streamID, bytes)
    }

    /// Resets `streamID` with RST_STREAM(`code`) (the client went away, a timeout). The stream is forgotten: no event
    /// follows for it. The connection is untouched.
    public func resetStream(streamID: Int32, code: H2ErrorCode = .cancel) {
        guard let session, let stream = streams.removeValue(forKey: streamID) else { return }
        stream.abandoned = true
        totalBufferedBytes -= stream.bufferedBytes
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, code.rawValue)
    }

    /// Sends GOAWAY(NO_ERROR): no stream will be opened any more; open ones complete.
    public func goAway() {
        guard let session, closeReason == nil else { return }
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, H2ErrorCode.noError.rawValue, nil, 0)
    }

    /// Ends the session (the connection is closing or closed): every open stream gets
    /// `didFailStream(.connectionClosed)`, then nghttp2's state is freed. Later calls do nothing.
    public func close() {
        guard let session else { return }
        closeReason = closeReason ?? "closed"
        let open = streams.keys.sorted()
        streams.removeAll()
        totalBufferedBytes = 0
        self.session = nil
        nghttp2_session_del(session)
        heldHeads.removeAll()
        for id in open { delegate?.h2(self, didFailStream: id, .connectionClosed) }
    }

    func terminate(_ code: H2ErrorCode, reason: String) {
        guard closeReason == nil else { return }
        closeReason = reason
        if let session { nghttp2_session_terminate_session(session, code.rawValue) }
    }

    /// `CLOCK_MONOTONIC` in nanoseconds: the clock a session reads when its owner passes none.
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }
}
