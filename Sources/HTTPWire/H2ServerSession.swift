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
/// - `framing`: `.contentLength(n)` when `content-length` is present (nghttp2 checks it against the DATA
///   received: a mismatch resets the stream with PROTOCOL_ERROR, RFC 9113 §8.1.1); otherwise `.chunked` when
///   the HEADERS did not end the stream — meaning "a body of unknown length follows" (forward it with
///   chunked coding or reframe); `.none` when it did.
/// - `expectContinue` for `expect: 100-continue` (answer with `sendContinue(streamID:)` if you wish).
/// - Malformed requests (RFC 9113 §8.1.1, §8.2, §8.3) are reset with PROTOCOL_ERROR and never reported:
///   upper-case or invalid names, invalid values (CR, LF, NUL, leading/trailing whitespace),
///   connection-specific fields (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`,
///   `upgrade`), `te` other than `trailers`, unknown/duplicate/misplaced pseudo-header fields, a missing
///   `:method`/`:scheme`/`:path`. Most are nghttp2's HTTP messaging checks (never disabled); we re-check
///   names and values ourselves. `CONNECT` (and extended CONNECT) is refused with RST_STREAM(REFUSED_STREAM):
///   the gateway is not a tunnel. Request trailers are discarded.
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

    private var session: OpaquePointer?
    private var streams: [Int32: H2Stream] = [:]
    private var controlFrames: H2TokenBucket
    private var glitches: H2TokenBucket
    private var drained: [Int32] = []
    /// Set when the session was terminated (by us or nghttp2); `receive` then refuses input.
    private var closeReason: String?
    private var errorGoAwaySent = false
    private var shutdown: ShutdownState = .none
    /// Monotonic clock in nanoseconds (replaceable by tests).
    var now: () -> UInt64 = H2ServerSession.monotonicNanoseconds
    /// Response bytes queued over all streams and not yet handed to `send` (see `bufferedBytes(streamID:)`).
    public private(set) var totalBufferedBytes = 0
    /// Asked each time the client resets a stream whose response was not complete, beside this connection's own
    /// limits: nil to go on, or a reason to end the session with GOAWAY(ENHANCE_YOUR_CALM) (the server's budget
    /// across connections, CVE-2023-44487 with reconnects).
    public var clientResetHook: (() -> String?)?

    private enum ShutdownState { case none, noticeSent, finalSent }
    private static let shutdownPing: [UInt8] = Array("gwdrain!".utf8)

    /// Creates the session and queues our SETTINGS and the connection WINDOW_UPDATE (call `send`).
    public init(limits: H2Limits = .default, delegate: H2SessionDelegate) {
        self.limits = limits
        self.delegate = delegate
        let start = H2ServerSession.monotonicNanoseconds()
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
        let rv = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rv < 0 {
            let code: H2ErrorCode
            switch Int32(rv) {
            case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue, NGHTTP2_ERR_FLOODED.rawValue: code = .enhanceYourCalm
            case NGHTTP2_ERR_NOMEM.rawValue, NGHTTP2_ERR_CALLBACK_FAILURE.rawValue: code = .internalError
            default: code = .protocolError
            }
            terminate(code, reason: H2ServerSession.reason(forLibraryError: Int32(rv)))
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

    // MARK: - Flow control of request bodies

    /// Says that `bytes` body bytes of `streamID` delivered by `didReceiveData` were forwarded (or
    /// discarded): nghttp2 may now open the stream and connection windows again (WINDOW_UPDATE once half a
    /// window was consumed). Extra bytes beyond what was delivered, and closed streams, are ignored (the
    /// session consumes the rest of a closed stream itself).
    public func consume(streamID: Int32, bytes: Int) {
        guard let session, bytes > 0, let stream = streams[streamID] else { return }
        let n = min(bytes, stream.unconsumed)
        guard n > 0 else { return }
        stream.unconsumed -= n
        nghttp2_session_consume(session, streamID, n)
    }

    // MARK: - Responses

    /// Submits the response head (`:status` + `headers`) of `streamID`. Names are lower-cased; pseudo,
    /// connection-specific (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`,
    /// `te`, and names listed in `connection`) and invalid fields are dropped. With `endStream` false, the
    /// body follows through `sendData`. Returns false when the stream is gone, already has a head, or
    /// `status` is not in 200…999.
    @discardableResult
    public func sendResponseHead(streamID: Int32, status: Int, headers: [(String, String)], endStream: Bool) -> Bool {
        var list = H2HeaderList()
        for (name, value) in headers {
            var name = name
            var value = value
            name.withUTF8 { n in value.withUTF8 { v in list.add(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) } }
        }
        return submitResponse(streamID: streamID, status: status, list: list, endStream: endStream)
    }

    /// `sendResponseHead` from a list the caller built (no intermediate strings).
    @discardableResult
    public func sendResponseHead(streamID: Int32, status: Int, list: H2HeaderList, endStream: Bool) -> Bool {
        submitResponse(streamID: streamID, status: status, list: list, endStream: endStream)
    }

    /// `sendResponseHead` from parsed header fields (e.g. an upstream's `HTTPResponseHead.headers`),
    /// without a `String` per field.
    @discardableResult
    public func sendResponseHead(streamID: Int32, status: Int, headers: HTTPHeaders, endStream: Bool) -> Bool {
        var list = H2HeaderList()
        headers.forEachField { _, name, value in list.add(name, value) }
        return submitResponse(streamID: streamID, status: status, list: list, endStream: endStream)
    }

    /// Sends an interim `100 Continue` on `streamID` (before the final head). Returns false when the stream
    /// is gone or already has its final head.
    @discardableResult
    public func sendContinue(streamID: Int32) -> Bool {
        guard let session, let stream = streams[streamID], !stream.headSent, !stream.rejected else { return false }
        let list = H2HeaderList()
        return list.withNV(status: 100) { nva in
            nghttp2_submit_headers(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, nil, nva.baseAddress, nva.count, nil) >= 0
        }
    }

    /// Queues response body bytes of `streamID` (copied); `endStream` ends the response after them (bytes
    /// may be empty). Returns false when the stream is gone, has no head with a body, or was ended.
    @discardableResult
    public func sendData(streamID: Int32, _ bytes: UnsafeRawBufferPointer, endStream: Bool) -> Bool {
        guard let session, let stream = streams[streamID], stream.headSent, stream.hasBody, !stream.endQueued else {
            return false
        }
        stream.out.append(contentsOf: bytes)
        totalBufferedBytes += bytes.count
        if endStream { stream.endQueued = true }
        if stream.bufferedBytes >= limits.outputLowWatermark { stream.aboveLowWatermark = true }
        if stream.deferred, stream.bufferedBytes > 0 || endStream {
            stream.deferred = false
            nghttp2_session_resume_data(session, streamID)
        }
        return true
    }

    /// `sendData` from an array.
    @discardableResult
    public func sendData(streamID: Int32, _ bytes: [UInt8], endStream: Bool) -> Bool {
        bytes.withUnsafeBytes { sendData(streamID: streamID, $0, endStream: endStream) }
    }

    /// Response bytes queued for `streamID` and not yet handed to `send` (0 for unknown streams).
    public func bufferedBytes(streamID: Int32) -> Int {
        streams[streamID]?.bufferedBytes ?? 0
    }

    /// Resets `streamID` with RST_STREAM(`code`); the delegate then gets `didResetStream` (unless the
    /// response was already complete).
    public func resetStream(streamID: Int32, code: H2ErrorCode) {
        guard let session else { return }
        if let stream = streams[streamID] { stream.rejected = true }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, code.rawValue)
    }

    /// Ends the connection.
    /// - `.noError` (graceful, for shutdown): sends a GOAWAY shutdown notice (last stream 2^31−1) and a
    ///   PING; when the PING is acknowledged, the final GOAWAY names the last stream we processed. Streams
    ///   up to it complete normally; `isFinished` becomes true once they are done. Bound the wait with
    ///   `shutdown_grace`. Calling it again is harmless.
    /// - any other code: immediate GOAWAY(`code`); in-flight streams are abandoned and the session finishes
    ///   once the GOAWAY is sent.
    public func goAway(code: H2ErrorCode = .noError) {
        guard let session else { return }
        if code != .noError {
            terminate(code, reason: "goaway_" + code.description)
            return
        }
        guard shutdown == .none, closeReason == nil else { return }
        shutdown = .noticeSent
        if nghttp2_submit_shutdown_notice(session) != 0 {
            submitFinalGoAway()
            return
        }
        H2ServerSession.shutdownPing.withUnsafeBufferPointer {
            _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress)
        }
    }

    // MARK: - Internals

    private func submitFinalGoAway() {
        guard let session, shutdown != .finalSent else { return }
        shutdown = .finalSent
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue),
                              nghttp2_session_get_last_proc_stream_id(session), H2ErrorCode.noError.rawValue, nil, 0)
    }

    private func submitResponse(streamID: Int32, status: Int, list: H2HeaderList, endStream: Bool) -> Bool {
        guard let session, (200...999).contains(status), let stream = streams[streamID], !stream.headSent,
              !(stream.rejected && !stream.exceeded) else { return false }
        let rv: Int32 = list.withNV(status: status) { nva in
            if endStream {
                return nghttp2_submit_response(session, streamID, nva.baseAddress, nva.count, nil)
            }
            var provider = nghttp2_data_provider()
            provider.source.ptr = nil
            provider.read_callback = H2ServerSession.readCallback
            return nghttp2_submit_response(session, streamID, nva.baseAddress, nva.count, &provider)
        }
        guard rv == 0 else { return false }
        stream.headSent = true
        stream.hasBody = !endStream
        return true
    }

    private func terminate(_ code: H2ErrorCode, reason: String) {
        guard closeReason == nil else { return }
        closeReason = reason
        if let session { nghttp2_session_terminate_session(session, code.rawValue) }
    }

    private func glitch(_ reason: String) {
        guard closeReason == nil else { return }
        if !glitches.take(now: now()) { terminate(.enhanceYourCalm, reason: "too_many_glitches") }
    }

    /// Resets a stream we refuse before the delegate heard of it.
    private func reject(_ stream: H2Stream, _ code: H2ErrorCode = .protocolError) {
        guard !stream.rejected, let session else { return }
        stream.rejected = true
        stream.dropHeadState()
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, code.rawValue)
        if code == .protocolError { glitch("malformed_request") }
    }

    static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    static func reason(forLibraryError code: Int32) -> String {
        switch code {
        case NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue: "nghttp2_bad_client_magic"
        case NGHTTP2_ERR_FLOODED.rawValue: "nghttp2_flooded"
        case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue: "nghttp2_too_many_continuations"
        case NGHTTP2_ERR_NOMEM.rawValue: "nghttp2_nomem"
        case NGHTTP2_ERR_CALLBACK_FAILURE.rawValue: "nghttp2_callback_failure"
        default: "nghttp2_error_\(-Int(code))"
        }
    }

    private static func from(_ userData: UnsafeMutableRawPointer?) -> H2ServerSession? {
        guard let userData else { return nil }
        return Unmanaged<H2ServerSession>.fromOpaque(userData).takeUnretainedValue()
    }

    // MARK: nghttp2 callbacks

    private static func install(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame, let me = H2ServerSession.from(user) else { return 0 }
            me.onBeginHeaders(frame.pointee)
            return me.callbackResult
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, let me = H2ServerSession.from(user) else { return 0 }
            me.onHeader(frame.pointee, UnsafeRawBufferPointer(start: name, count: nameLength),
                        UnsafeRawBufferPointer(start: value, count: valueLength))
            return me.callbackResult
        }
        nghttp2_session_callbacks_set_on_invalid_header_callback(callbacks) { _, frame, _, _, _, _, _, user in
            guard let frame, let me = H2ServerSession.from(user) else { return 0 }
            if let stream = me.streams[frame.pointee.hd.stream_id] { me.reject(stream) }
            return me.callbackResult
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame, let me = H2ServerSession.from(user) else { return 0 }
            me.onFrameReceived(frame.pointee)
            return me.callbackResult
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, _, _, user in
            guard let me = H2ServerSession.from(user) else { return 0 }
            me.glitch("invalid_frame")
            return me.callbackResult
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            guard let me = H2ServerSession.from(user) else { return 0 }
            me.onData(streamID, UnsafeRawBufferPointer(start: data, count: length))
            return me.callbackResult
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
            H2ServerSession.from(user)?.onStreamClose(streamID, H2ErrorCode(rawValue: errorCode))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame, let me = H2ServerSession.from(user) else { return 0 }
            me.onFrameSent(frame.pointee)
            return 0
        }
    }

    /// What receive-side callbacks return: once the session is terminated, stop nghttp2 from processing
    /// the rest of the input (a flood buffer would otherwise still be parsed and answered).
    private var callbackResult: Int32 {
        closeReason == nil ? 0 : Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }

    private static let readCallback: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, user in
        guard let me = H2ServerSession.from(user) else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        return me.readData(streamID, buffer, length, flags)
    }

    private func onBeginHeaders(_ frame: nghttp2_frame) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, frame.headers.cat == NGHTTP2_HCAT_REQUEST else { return }
        streams[frame.hd.stream_id] = H2Stream(id: frame.hd.stream_id)
    }

    private func onHeader(_ frame: nghttp2_frame, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, frame.headers.cat == NGHTTP2_HCAT_REQUEST,
              let stream = streams[frame.hd.stream_id], !stream.rejected, !stream.exceeded else { return }
        let isPseudo = name.first == UInt8(ascii: ":")
        stream.headerBytes += name.count + value.count + 4
        if !isPseudo { stream.headerCount += 1 }
        if stream.headerBytes > limits.maxHeaderListBytes || stream.headerCount > limits.maxHeaders {
            stream.exceeded = true
            stream.dropHeadState()
            return
        }
        if isPseudo {
            // Pseudo-fields come first and once each (RFC 9113 §8.3); a switch on the name, no key paths.
            guard stream.fields.isEmpty, stream.cookie == nil, stream.hostValue == nil else { reject(stream); return }
            func setOnce(_ slot: inout [UInt8]?) {
                if slot == nil { slot = Array(value) } else { reject(stream) }
            }
            switch name.count {
            case 5 where HTTPSyntax.equalsLowercased(name, ":path"): setOnce(&stream.path)
            case 7 where HTTPSyntax.equalsLowercased(name, ":method"): setOnce(&stream.method)
            case 7 where HTTPSyntax.equalsLowercased(name, ":scheme"): setOnce(&stream.scheme)
            case 10 where HTTPSyntax.equalsLowercased(name, ":authority"): setOnce(&stream.authority)
            default:
                reject(stream) // :protocol (extended CONNECT is not enabled) or unknown
            }
            return
        }
        // nghttp2 already validated; re-check what must never reach an HTTP/1.1 upstream.
        guard !name.isEmpty, name.allSatisfy({ HTTPSyntax.isTChar($0) && !($0 >= 0x41 && $0 <= 0x5A) }),
              HTTPSyntax.isFieldValue(value),
              !HTTPSyntax.isWhitespace(value.first ?? 0x21), !HTTPSyntax.isWhitespace(value.last ?? 0x21) else {
            reject(stream)
            return
        }
        if HTTPHeaderName.isConnectionSpecific(name) {
            reject(stream)
            return
        }
        if name.count == 2, HTTPSyntax.equalsLowercased(name, "te"), !HTTPSyntax.equalsLowercased(value, "trailers") {
            reject(stream)
            return
        }
        if HTTPSyntax.equalsLowercased(name, "cookie") {
            if stream.cookie == nil { stream.cookie = Array(value) } else {
                stream.cookie?.append(contentsOf: "; ".utf8)
                stream.cookie?.append(contentsOf: value)
            }
            return
        }
        if HTTPSyntax.equalsLowercased(name, "host") {
            guard stream.hostValue == nil else { reject(stream); return }
            stream.hostValue = Array(value)
        } else if HTTPSyntax.equalsLowercased(name, "content-length") {
            guard let n = H2ServerSession.parseContentLength(value),
                  stream.contentLength == nil || stream.contentLength == n else {
                reject(stream)
                return
            }
            stream.contentLength = n
        } else if HTTPSyntax.equalsLowercased(name, "expect"), HTTPSyntax.equalsLowercased(value, "100-continue") {
            stream.expectContinue = true
        }
        stream.appendField(name, value)
    }

    static func parseContentLength(_ value: UnsafeRawBufferPointer) -> Int64? {
        guard !value.isEmpty, value.count <= 18 else { return nil }
        var n: Int64 = 0
        for byte in value {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            n = n * 10 + Int64(byte - 0x30)
        }
        return n
    }

    private func onFrameReceived(_ frame: nghttp2_frame) {
        let type = UInt32(frame.hd.type)
        let endStream = frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        let ack = frame.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
        let id = frame.hd.stream_id
        switch type {
        case NGHTTP2_HEADERS.rawValue:
            guard let stream = streams[id] else { return }
            if endStream { stream.remoteEnded = true }
            if frame.headers.cat == NGHTTP2_HCAT_REQUEST {
                finishRequest(stream, endStream: endStream)
            } else if endStream, stream.announced, !stream.exceeded, !stream.rejected, closeReason == nil {
                delegate?.h2(self, didEndStream: id)
            }
        case NGHTTP2_DATA.rawValue:
            guard let stream = streams[id] else { return }
            if frame.hd.length == 0 && !endStream { glitch("empty_data") }
            if endStream {
                stream.remoteEnded = true
                if stream.announced, !stream.exceeded, !stream.rejected, closeReason == nil {
                    delegate?.h2(self, didEndStream: id)
                }
            }
        case NGHTTP2_SETTINGS.rawValue, NGHTTP2_PING.rawValue:
            if ack {
                if type == NGHTTP2_PING.rawValue, shutdown == .noticeSent,
                   withUnsafeBytes(of: frame.ping.opaque_data, { $0.elementsEqual(H2ServerSession.shutdownPing) }) {
                    submitFinalGoAway()
                }
                return
            }
            guard closeReason == nil else { return }
            if !controlFrames.take(now: now()) {
                terminate(.enhanceYourCalm, reason: type == NGHTTP2_PING.rawValue ? "ping_flood" : "settings_flood")
            }
        case NGHTTP2_RST_STREAM.rawValue:
            if let stream = streams[id], !stream.responseComplete {
                glitch("client_reset")
                if closeReason == nil, let reason = clientResetHook?() { terminate(.enhanceYourCalm, reason: reason) }
            }
        case NGHTTP2_GOAWAY.rawValue:
            delegate?.h2(self, didReceiveGoAway: H2ErrorCode(rawValue: frame.goaway.error_code),
                         lastStreamID: frame.goaway.last_stream_id)
        default:
            break
        }
    }

    private func finishRequest(_ stream: H2Stream, endStream: Bool) {
        guard !stream.rejected, !stream.announced, closeReason == nil else { return }
        if stream.exceeded {
            stream.announced = true
            delegate?.h2(self, streamExceededHeaderLimit: stream.id)
            return
        }
        guard let methodBytes = stream.method, !methodBytes.isEmpty,
              methodBytes.withUnsafeBytes({ HTTPSyntax.isToken($0) }) else { reject(stream); return }
        let method = String(decoding: methodBytes, as: UTF8.self)
        if method == "CONNECT" {
            reject(stream, .refusedStream)
            return
        }
        guard let path = stream.path, let first = path.first, stream.scheme != nil,
              path.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }),
              first == UInt8(ascii: "/") || (path == [UInt8(ascii: "*")] && method == "OPTIONS") else {
            reject(stream)
            return
        }
        if let authority = stream.authority {
            guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else { reject(stream); return }
            if let host = stream.hostValue {
                guard host.count == authority.count,
                      zip(host, authority).allSatisfy({ HTTPSyntax.lowercased($0) == HTTPSyntax.lowercased($1) }) else {
                    reject(stream)
                    return
                }
            } else {
                "host".utf8.withContiguousStorageIfAvailable { n in
                    authority.withUnsafeBytes { stream.appendField(UnsafeRawBufferPointer(n), $0) }
                }
            }
        }
        guard let hostBytes = stream.authority ?? stream.hostValue else { reject(stream); return }
        if let cookie = stream.cookie {
            "cookie".utf8.withContiguousStorageIfAvailable { n in
                cookie.withUnsafeBytes { stream.appendField(UnsafeRawBufferPointer(n), $0) }
            }
        }
        let framing: RequestBodyFraming
        if let n = stream.contentLength { framing = .contentLength(n) } else { framing = endStream ? .none : .chunked }
        let head = HTTPRequestHead(
            method: method, target: String(decoding: path, as: UTF8.self), versionMinor: 1,
            headers: HTTPHeaders(validatedBytes: stream.block, fields: stream.fields),
            framing: framing, keepAlive: true, expectContinue: stream.expectContinue,
            connectionTokens: [], host: String(decoding: hostBytes, as: UTF8.self))
        stream.announced = true
        stream.dropHeadState()
        delegate?.h2(self, didReceiveRequest: stream.id, head: head, endStream: endStream)
    }

    private func onData(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id], stream.announced, !stream.exceeded, !stream.rejected, closeReason == nil else {
            if let session { nghttp2_session_consume(session, id, bytes.count) }
            return
        }
        stream.unconsumed += bytes.count
        delegate?.h2(self, didReceiveData: id, bytes)
    }

    private func onStreamClose(_ id: Int32, _ code: H2ErrorCode) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        totalBufferedBytes -= stream.bufferedBytes
        if stream.unconsumed > 0, let session {
            nghttp2_session_consume_connection(session, stream.unconsumed)
        }
        guard stream.announced else { return }
        if stream.responseComplete {
            delegate?.h2(self, didCloseStream: id)
        } else {
            delegate?.h2(self, didResetStream: id, errorCode: code == .noError ? .cancel : code)
        }
    }

    private func onFrameSent(_ frame: nghttp2_frame) {
        let type = UInt32(frame.hd.type)
        switch type {
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            guard frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0,
                  let stream = streams[frame.hd.stream_id] else { return }
            stream.responseComplete = true
            if !stream.remoteEnded, let session {
                // RFC 9113 §8.1: complete response before the request ended; stop the request body.
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, H2ErrorCode.noError.rawValue)
            }
        case NGHTTP2_GOAWAY.rawValue:
            if frame.goaway.error_code != H2ErrorCode.noError.rawValue {
                errorGoAwaySent = true
                if closeReason == nil {
                    closeReason = "goaway_" + H2ErrorCode(rawValue: frame.goaway.error_code).description
                }
            }
        default:
            break
        }
    }

    private func readData(_ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
                          _ flags: UnsafeMutablePointer<UInt32>?) -> Int {
        guard let stream = streams[id], let buffer else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, stream.bufferedBytes)
        if n > 0 {
            stream.out.withUnsafeBufferPointer { source in
                buffer.update(from: source.baseAddress! + stream.outOffset, count: n)
            }
            stream.outOffset += n
            totalBufferedBytes -= n
            if stream.outOffset == stream.out.count {
                // A large buffer goes back to the allocator once drained (a stream that once held much need not).
                stream.out.removeAll(keepingCapacity: stream.out.capacity <= 32 * 1024)
                stream.outOffset = 0
            } else if stream.outOffset >= 64 * 1024, stream.outOffset * 2 >= stream.out.count {
                stream.out.removeFirst(stream.outOffset)
                stream.outOffset = 0
            }
        }
        if stream.aboveLowWatermark, stream.bufferedBytes < limits.outputLowWatermark {
            stream.aboveLowWatermark = false
            drained.append(id)
        }
        if stream.bufferedBytes == 0 {
            if stream.endQueued {
                flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            } else if n == 0 {
                stream.deferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        return n
    }
}

@inline(__always)
private func entry(_ id: nghttp2_settings_id, _ value: UInt32) -> nghttp2_settings_entry {
    nghttp2_settings_entry(settings_id: Int32(id.rawValue), value: value)
}

/// Response header fields collected into one byte buffer, then exposed as an `nghttp2_nv` array.
public struct H2HeaderList {
    private var storage: [UInt8] = []
    private var spans: [(name: Int, nameLength: Int, value: Int, valueLength: Int)] = []
    private var connectionTokens: [[UInt8]] = []

    /// An empty list; `capacity` bytes of names and values are reserved.
    public init(capacity: Int = 0) {
        storage.reserveCapacity(capacity)
        spans.reserveCapacity(16)
    }

    /// Adds one field: the name lower-cased, the value OWS-trimmed. Dropped: a name that is not a token, a value
    /// with a control byte, and the connection-specific fields of RFC 9113 §8.2.2 (`connection`, `keep-alive`,
    /// `proxy-connection`, `transfer-encoding`, `upgrade`, `te`); fields named in `Connection` are left out too.
    public mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard !name.isEmpty, name.allSatisfy(HTTPSyntax.isTChar), HTTPSyntax.isFieldValue(value) else { return }
        if HTTPHeaderName.isConnectionSpecific(name) || (name.count == 2 && HTTPSyntax.equalsLowercased(name, "te")) {
            if name.count == 10, HTTPSyntax.equalsLowercased(name, "connection") {
                HTTPHeaders.forEachListElement(value) { token in
                    connectionTokens.append(token.map(HTTPSyntax.lowercased))
                    return true
                }
            }
            return
        }
        let (lower, upper) = HTTPSyntax.trimOWS(value, 0, value.count)
        let nameStart = storage.count
        storage.append(contentsOf: name)
        storage.withUnsafeMutableBufferPointer { bytes in
            for i in nameStart..<bytes.count { bytes[i] = HTTPSyntax.lowercased(bytes[i]) }
        }
        let valueStart = storage.count
        storage.append(contentsOf: UnsafeRawBufferPointer(rebasing: value[lower..<upper]))
        spans.append((nameStart, name.count, valueStart, upper - lower))
    }

    /// `add` for strings (names and values the gateway makes itself).
    public mutating func add(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { n in value.withUTF8 { v in add(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) } }
    }

    /// Calls `body` with `:status` followed by the kept fields as `nghttp2_nv` (valid during the call).
    func withNV<R>(status: Int, _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        // `:status` and its three digits live on the stack, the fields in `storage` as they are (no copy of the
        // list). nghttp2 copies every name and value (flag NONE) and never writes through these pointers; its
        // `nghttp2_nv` just declares them mutable.
        let statusName: StaticString = ":status"
        var digits: (UInt8, UInt8, UInt8) = (0, 0, 0)
        let code = min(max(status, 100), 999)
        digits.0 = UInt8(ascii: "0") &+ UInt8(code / 100)
        digits.1 = UInt8(ascii: "0") &+ UInt8(code / 10 % 10)
        digits.2 = UInt8(ascii: "0") &+ UInt8(code % 10)
        let flags = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        let tokens = connectionTokens
        return withUnsafeMutableBytes(of: &digits) { digitBytes in
            storage.withUnsafeBufferPointer { raw in
                let base = UnsafeMutablePointer(mutating: raw.baseAddress ?? statusName.utf8Start)
                var nva: [nghttp2_nv] = []
                nva.reserveCapacity(spans.count + 1)
                nva.append(nghttp2_nv(name: UnsafeMutablePointer(mutating: statusName.utf8Start),
                                      value: digitBytes.baseAddress!.assumingMemoryBound(to: UInt8.self), namelen: 7,
                                      valuelen: 3, flags: flags))
                for span in spans {
                    if !tokens.isEmpty {
                        let name = UnsafeBufferPointer(start: base + span.name, count: span.nameLength)
                        if tokens.contains(where: { $0.elementsEqual(name) }) { continue }
                    }
                    nva.append(nghttp2_nv(name: base + span.name, value: base + span.value, namelen: span.nameLength,
                                          valuelen: span.valueLength, flags: flags))
                }
                return nva.withUnsafeBufferPointer(body)
            }
        }
    }
}
