import CNghttp2

/// `H2ClientSession`: the nghttp2 callbacks (installed once per session), turning received HEADERS and DATA into
/// response events, and nghttp2 pulling request body bytes from a stream's buffer.
extension H2ClientSession {
    /// At most this many interim (1xx) heads per stream.
    static let maxInterimHeads = 8

    func onBeginHeaders(_ frame: nghttp2_frame) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, let stream = streams[frame.hd.stream_id] else { return }
        stream.resetFields()
        stream.status = stream.phase == .head ? 0 : stream.status
    }

    func onHeader(_ frame: nghttp2_frame, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, let stream = streams[frame.hd.stream_id],
              !stream.malformed, stream.phase == .head || stream.phase == .body else { return }
        stream.headerBytes += name.count + value.count + 4
        if name.first == UInt8(ascii: ":") {
            // nghttp2 allows only `:status` in a response, once and first (RFC 9113 §8.3.2), and none in trailers.
            guard stream.phase == .head, name.count == 7, HTTPSyntax.equalsLowercased(name, ":status"), value.count == 3,
                  value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                malformed(stream)
                return
            }
            stream.status = Int(value[0] - 0x30) * 100 + Int(value[1] - 0x30) * 10 + Int(value[2] - 0x30)
            return
        }
        stream.headerCount += 1
        if stream.headerBytes > limits.maxHeaderListBytes || stream.headerCount > limits.maxHeaders {
            malformed(stream)
            return
        }
        // nghttp2 checked the field already; what must never reach an HTTP/1.1 client is checked again.
        guard !name.isEmpty, name.allSatisfy({ HTTPSyntax.isTChar($0) && !($0 >= 0x41 && $0 <= 0x5A) }),
              HTTPSyntax.isFieldValue(value), !HTTPHeaderName.isConnectionSpecific(name) else {
            malformed(stream)
            return
        }
        stream.appendField(name, value)
    }

    func onFrameReceived(_ frame: nghttp2_frame) {
        let type = UInt32(frame.hd.type)
        let endStream = frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        let ack = frame.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
        let id = frame.hd.stream_id
        switch type {
        case NGHTTP2_HEADERS.rawValue:
            guard let stream = streams[id], !stream.malformed else { return }
            switch stream.phase {
            case .head:
                if stream.status < 200 {
                    guard stream.status != 101, !endStream, stream.status >= 100 else { malformed(stream); return }
                    stream.resetFields()
                    stream.interimHeads += 1
                    if stream.interimHeads > Self.maxInterimHeads { malformed(stream) }
                    return
                }
                stream.phase = endStream ? .done : .body
                let headers = stream.takeHeaders()
                delegate?.h2(self, didReceiveResponse: id, status: stream.status, headers: headers, endStream: endStream)
                if endStream { complete(stream) }
            case .body:
                // Trailers carry END_STREAM (nghttp2 refuses a trailing HEADERS without it).
                stream.phase = .done
                let trailers = stream.takeHeaders()
                delegate?.h2(self, didReceiveTrailers: id, trailers)
                complete(stream)
            case .trailers, .done:
                return
            }
        case NGHTTP2_DATA.rawValue:
            guard endStream, let stream = streams[id], !stream.malformed, stream.phase == .body else { return }
            stream.phase = .done
            complete(stream)
        case NGHTTP2_SETTINGS.rawValue, NGHTTP2_PING.rawValue:
            guard !ack, closeReason == nil else { return }
            if !controlFrames.take(now: now()) {
                terminate(.enhanceYourCalm, reason: type == NGHTTP2_PING.rawValue ? "ping_flood" : "settings_flood")
                return
            }
            if type == NGHTTP2_SETTINGS.rawValue { delegate?.h2DidReceiveSettings(self) }
        case NGHTTP2_GOAWAY.rawValue:
            goAwayReceived = true
            delegate?.h2(self, didReceiveGoAway: H2ErrorCode(rawValue: frame.goaway.error_code),
                         lastStreamID: frame.goaway.last_stream_id)
        default:
            break
        }
    }

    /// nghttp2 ended the session on a connection error it found itself (a frame too large, a bad preface, …): the
    /// GOAWAY it queued carries the code; nothing more is read.
    func onFrameSent(_ frame: nghttp2_frame) {
        guard UInt32(frame.hd.type) == NGHTTP2_GOAWAY.rawValue, frame.goaway.error_code != 0, closeReason == nil else { return }
        closeReason = "goaway_" + H2ErrorCode(rawValue: frame.goaway.error_code).description
    }

    func onData(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let session else { return }
        // The connection window reopens at once: a stream whose client is slow holds only its own window.
        nghttp2_session_consume_connection(session, bytes.count)
        guard let stream = streams[streamID], !stream.malformed, stream.phase == .body else {
            nghttp2_session_consume_stream(session, streamID, bytes.count)
            return
        }
        delegate?.h2(self, didReceiveData: streamID, bytes)
    }

    func onStreamClose(_ streamID: Int32, _ code: H2ErrorCode) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        totalBufferedBytes -= stream.bufferedBytes
        guard stream.phase != .done, !stream.abandoned else { return }
        let failure: H2StreamFailure
        if stream.malformed {
            failure = .malformed
        } else if code == .refusedStream {
            failure = .refused
        } else if closeReason != nil {
            failure = .connectionClosed
        } else {
            failure = .reset(code)
        }
        delegate?.h2(self, didFailStream: streamID, failure)
    }

    /// The response of `stream` is complete. A request still being sent is cut (RST_STREAM(CANCEL)): its answer is
    /// known, and an open stream would hold a slot of the server's concurrency limit.
    func complete(_ stream: H2ClientStream) {
        if let session, !stream.endQueued || stream.bufferedBytes > 0 || stream.trailers != nil {
            streams.removeValue(forKey: stream.id)
            totalBufferedBytes -= stream.bufferedBytes
            stream.abandoned = true
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, H2ErrorCode.cancel.rawValue)
        }
        delegate?.h2(self, didCompleteStream: stream.id)
    }

    /// The response broke a rule or a limit: the stream is reset, reported `malformed` when it closes.
    func malformed(_ stream: H2ClientStream) {
        guard !stream.malformed, let session else { return }
        stream.malformed = true
        stream.resetFields()
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, H2ErrorCode.protocolError.rawValue)
    }

    func readData(_ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
                  _ flags: UnsafeMutablePointer<UInt32>?) -> Int {
        guard let stream = streams[id], let buffer else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        return H2OutgoingBodySource.read(stream, id: id, session: session, into: buffer, length: length, flags: flags,
                                         lowWatermark: limits.outputLowWatermark,
                                         totalBufferedBytes: &totalBufferedBytes, drained: &drained)
    }

    // MARK: nghttp2 callbacks

    @inline(__always)
    static func with(_ userData: UnsafeMutableRawPointer?, _ body: (H2ClientSession) -> Int32) -> Int32 {
        guard let userData else { return 0 }
        return Unmanaged<H2ClientSession>.fromOpaque(userData)._withUnsafeGuaranteedRef(body)
    }

    /// What receive-side callbacks return: once the session is terminated, nghttp2 stops processing the input.
    var callbackResult: Int32 { closeReason == nil ? 0 : Int32(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }

    static func install(_ callbacks: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            return H2ClientSession.with(user) { me in
                me.onBeginHeaders(frame.pointee)
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame else { return 0 }
            return H2ClientSession.with(user) { me in
                me.onHeader(frame.pointee, UnsafeRawBufferPointer(start: name, count: nameLength),
                            UnsafeRawBufferPointer(start: value, count: valueLength))
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            return H2ClientSession.with(user) { me in
                me.onFrameReceived(frame.pointee)
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            H2ClientSession.with(user) { me in
                me.onData(streamID, UnsafeRawBufferPointer(start: data, count: length))
                return me.callbackResult
            }
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            return H2ClientSession.with(user) { me in
                me.onFrameSent(frame.pointee)
                return 0
            }
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, user in
            H2ClientSession.with(user) { me in
                me.onStreamClose(streamID, H2ErrorCode(rawValue: errorCode))
                return 0
            }
        }
    }
}
