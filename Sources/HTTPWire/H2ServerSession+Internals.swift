import CNghttp2
#if canImport(Glibc)
import Glibc
#endif

/// `H2ServerSession`: submitting responses and GOAWAY, terminating, counting glitches, rejecting streams, and the
/// nghttp2 callbacks that hand events to the session (installed once per session).
extension H2ServerSession {
    // MARK: - Internals

    func submitFinalGoAway() {
        guard let session, shutdown != .finalSent else { return }
        shutdown = .finalSent
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue),
                              nghttp2_session_get_last_proc_stream_id(session), H2ErrorCode.noError.rawValue, nil, 0)
    }

    func submitResponse(streamID: Int32, status: Int, list: H2HeaderList, endStream: Bool) -> Bool {
        guard let session, (200...999).contains(status), let stream = streams[streamID], !stream.headSent,
              !(stream.rejected && !stream.exceeded) else { return false }
        let rv: Int32 = list.withNV(status: status) { nva in
            if endStream {
                return nghttp2_submit_response(session, streamID, nva.baseAddress, nva.count, nil)
            }
            var provider = nghttp2_data_provider()
            provider.source.ptr = nil
            // A closure literal, not a `static let`: a global would be reached through `swift_once` per response.
            provider.read_callback = { _, streamID, buffer, length, flags, _, user in
                guard let user else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                return Unmanaged<H2ServerSession>.fromOpaque(user)._withUnsafeGuaranteedRef {
                    $0.readData(streamID, buffer, length, flags)
                }
            }
            return nghttp2_submit_response(session, streamID, nva.baseAddress, nva.count, &provider)
        }
        guard rv == 0 else { return false }
        stream.headSent = true
        stream.hasBody = !endStream
        return true
    }

    func terminate(_ code: H2ErrorCode, reason: String) {
        guard closeReason == nil else { return }
        closeReason = reason
        if let session { nghttp2_session_terminate_session(session, code.rawValue) }
    }

    func glitch(_ reason: String) {
        guard closeReason == nil else { return }
        if !glitches.take(now: now()) { terminate(.enhanceYourCalm, reason: "too_many_glitches") }
    }

    /// Resets a stream we refuse before the delegate heard of it.
    func reject(_ stream: H2Stream, _ code: H2ErrorCode = .protocolError) {
        guard !stream.rejected, let session else { return }
        stream.rejected = true
        stream.dropHeadState()
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, code.rawValue)
        if code == .protocolError { glitch("malformed_request") }
    }

    /// `CLOCK_MONOTONIC` in nanoseconds: the clock a session reads when its owner passes none.
    public static func monotonicNanoseconds() -> UInt64 {
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

    // MARK: nghttp2 callbacks

    /// Runs `body` with the session behind a callback's user data, which is alive for the whole callback (nghttp2
    /// calls back only from inside `receive` and `send`): no retain and release around each of the several callbacks
    /// per request.
    @inline(__always)
    static func with(_ userData: UnsafeMutableRawPointer?, _ body: (H2ServerSession) -> Int32) -> Int32 {
        guard let userData else { return 0 }
        return Unmanaged<H2ServerSession>.fromOpaque(userData)._withUnsafeGuaranteedRef(body)
    }

    static func install(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            return H2ServerSession.with(user) { me in
                me.onBeginHeaders(frame.pointee)
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame else { return 0 }
            return H2ServerSession.with(user) { me in
                me.onHeader(frame.pointee, UnsafeRawBufferPointer(start: name, count: nameLength),
                            UnsafeRawBufferPointer(start: value, count: valueLength))
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_invalid_header_callback(callbacks) { _, frame, _, _, _, _, _, user in
            guard let frame else { return 0 }
            return H2ServerSession.with(user) { me in
                if let stream = me.streams[frame.pointee.hd.stream_id] { me.reject(stream) }
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            return H2ServerSession.with(user) { me in
                me.onFrameReceived(frame.pointee)
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, _, _, user in
            H2ServerSession.with(user) { me in
                me.glitch("invalid_frame")
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            H2ServerSession.with(user) { me in
                me.onData(streamID, UnsafeRawBufferPointer(start: data, count: length))
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
            H2ServerSession.with(user) { me in
                me.onStreamClose(streamID, H2ErrorCode(rawValue: errorCode))
                return 0
            }
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            return H2ServerSession.with(user) { me in
                me.onFrameSent(frame.pointee)
                return 0
            }
        }
    }

    /// What receive-side callbacks return: once the session is terminated, stop nghttp2 from processing
    /// the rest of the input (a flood buffer would otherwise still be parsed and answered).
    var callbackResult: Int32 {
        closeReason == nil ? 0 : Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
    }
}
