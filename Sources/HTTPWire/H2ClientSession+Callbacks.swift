import CNghttp2

/// `H2ClientSession`: the nghttp2 callbacks (installed once per session), turning received HEADERS and DATA into
/// response events, and nghttp2 pulling request body bytes from a stream's buffer.
extension H2ClientSession {
    /// At most this many interim (1xx) heads per stream.
    static let maxInterimHeads = 8

    func onBeginHeaders(_ frame: nghttp2_frame) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue else { return }
        resetBlock()
        guard let stream = streams[frame.hd.stream_id] else { return }
        stream.resetFields()
        stream.status = stream.phase == .head ? 0 : stream.status
    }

    /// Appends `name: value\r\n` to the block being received and records its ranges: two copies into a buffer kept
    /// from block to block. (Per stream, appending to two arrays that started empty at every block cost ~470
    /// instructions a field of a gRPC response, an allocation of each per block.)
    func appendField(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        let nameStart = blockCount
        let nameEnd = nameStart + name.count
        let valueStart = nameEnd + 2
        let valueEnd = valueStart + value.count
        if valueEnd + 2 > blockCapacity { growBlock(to: valueEnd + 2) }
        guard let base = blockBytes else { return }
        if let n = name.baseAddress { (base + nameStart).copyMemory(from: n, byteCount: name.count) }
        (base + nameEnd).storeBytes(of: UInt8(ascii: ":"), as: UInt8.self)
        (base + nameEnd + 1).storeBytes(of: UInt8(ascii: " "), as: UInt8.self)
        if let v = value.baseAddress { (base + valueStart).copyMemory(from: v, byteCount: value.count) }
        (base + valueEnd).storeBytes(of: 13, as: UInt8.self)
        (base + valueEnd + 1).storeBytes(of: 10, as: UInt8.self)
        blockCount = valueEnd + 2
        if blockFields.capacity == 0 { blockFields.reserveCapacity(12) }
        blockFields.append(HTTPHeaderField(
            nameStart: Int32(clamping: nameStart), nameEnd: Int32(clamping: nameEnd),
            valueStart: Int32(clamping: valueStart), valueEnd: Int32(clamping: valueEnd)))
    }

    private func growBlock(to needed: Int) {
        let capacity = max(needed, 2 * blockCapacity, 512)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        if let old = blockBytes {
            grown.copyMemory(from: old, byteCount: blockCount)
            old.deallocate()
        }
        blockBytes = grown
        blockCapacity = capacity
    }

    /// Drops the block being received (a new one starts, or its stream broke a rule).
    func resetBlock() {
        blockCount = 0
        if !blockFields.isEmpty { blockFields.removeAll(keepingCapacity: true) }
    }

    /// The block's fields, handed over in arrays of their own (ranges valid by construction: not checked again).
    func takeBlock() -> HTTPHeaders {
        let count = blockCount
        let source = blockBytes
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if count > 0, let source, let destination = buffer.baseAddress {
                UnsafeMutableRawPointer(destination).copyMemory(from: source, byteCount: count)
            }
            initialized = count
        }
        let headers = HTTPHeaders(validatedBytes: bytes, fields: blockFields)
        blockFields = []
        blockCount = 0
        if blockCapacity > 16 * 1024 {
            blockBytes?.deallocate()
            blockBytes = nil
            blockCapacity = 0
        }
        return headers
    }

    /// One field of a response head or trailer section. nghttp2's HTTP messaging is off (see `init`): these are the
    /// session's own RFC 9113 §8 checks, each a stream error (`malformed`: RST_STREAM(PROTOCOL_ERROR), reported
    /// `.malformed`):
    /// - `:status` only in a head, once, before any regular field, three digits (RFC 9113 §8.3.2); no other pseudo
    ///   field (a request's included) and none in trailers (§8.1);
    /// - a name of lower-case token characters (§8.2.1, RFC 9110 §5.1); a value of field-value bytes with no leading
    ///   or trailing whitespace (§8.2.1, RFC 9110 §5.5);
    /// - no connection-specific field, `te` only as `trailers` (§8.2.2);
    /// - `content-length` at most once, never in a 1xx, only `0` in a 204 (where it is dropped, as nghttp2 dropped it);
    ///   the DATA is held against it (`onData`, `onFrameReceived`).
    func onHeader(_ frame: nghttp2_frame, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, let stream = streams[frame.hd.stream_id],
              !stream.malformed, stream.phase == .head || stream.phase == .body else { return }
        stream.headerBytes += name.count + value.count + 4
        if name.first == UInt8(ascii: ":") {
            guard stream.phase == .head, stream.headerCount == 0, stream.status == 0, Self.isStatusName(name),
                  value.count == 3, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
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
        guard !name.isEmpty, name.allSatisfy({ HTTPSyntax.isTChar($0) && !($0 >= 0x41 && $0 <= 0x5A) }),
              !HTTPSyntax.isWhitespace(value.first ?? 0x21), !HTTPSyntax.isWhitespace(value.last ?? 0x21),
              HTTPSyntax.isFieldValue(value) else {
            malformed(stream)
            return
        }
        switch name.count {
        case 2 where name[0] == UInt8(ascii: "t") && name[1] == UInt8(ascii: "e"):
            guard HTTPSyntax.equalsLowercased(value, "trailers") else { malformed(stream); return }
        case 14 where HTTPSyntax.equalsLowercased(name, "content-length"):
            if !contentLength(stream, value) { return }
        case 7, 10, 16, 17:
            if HTTPHeaderName.isConnectionSpecific(name) { malformed(stream); return }
        default:
            break
        }
        appendField(name, value)
    }

    /// `name` is exactly `:status` (lower case: an upper-case pseudo field is malformed too).
    @inline(__always)
    static func isStatusName(_ name: UnsafeRawBufferPointer) -> Bool {
        guard name.count == 7, let base = name.baseAddress else { return false }
        // ":sta" and "atus" overlap at byte 3; together they are the seven bytes.
        return base.loadUnaligned(as: UInt32.self) == UInt32(littleEndian: 0x6174_733A)
            && base.loadUnaligned(fromByteOffset: 3, as: UInt32.self) == UInt32(littleEndian: 0x7375_7461)
    }

    /// A `content-length` field (as nghttp2's messaging held it): in a 204 only `0`, then dropped (servers send it;
    /// RFC 9110 §8.6 forbids it there); never in a 1xx; at most once per response, trailers included; digits only.
    /// False when the field is not to be kept (dropped, or the stream is malformed).
    private func contentLength(_ stream: H2ClientStream, _ value: UnsafeRawBufferPointer) -> Bool {
        if stream.phase == .head, stream.status == 204 {
            guard stream.contentLength == nil, value.count == 1, value[0] == UInt8(ascii: "0") else {
                malformed(stream)
                return false
            }
            stream.contentLength = 0
            return false
        }
        guard stream.status / 100 != 1, stream.contentLength == nil,
              let n = H2ServerSession.parseContentLength(value) else {
            malformed(stream)
            return false
        }
        stream.contentLength = n
        return true
    }

    /// At the end of a response (END_STREAM): whether the DATA received matches `content-length` (RFC 9113 §8.1.1);
    /// when it does not, the stream is malformed.
    private func bodyLengthHolds(_ stream: H2ClientStream) -> Bool {
        guard let expected = stream.contentLength, stream.receivedBodyBytes != expected else { return true }
        malformed(stream)
        return false
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
                    // No `:status` (0), one below 100, a 101 (no upgrade in HTTP/2, RFC 9113 §8.6) or an interim head
                    // ending the stream (RFC 9113 §8.1) is malformed; other interim heads (100, 103, …) are skipped.
                    guard stream.status != 101, !endStream, stream.status >= 100 else { malformed(stream); return }
                    stream.resetFields()
                    resetBlock()
                    stream.interimHeads += 1
                    if stream.interimHeads > Self.maxInterimHeads { malformed(stream) }
                    return
                }
                // A response to HEAD, a 204 and a 304 have no content (RFC 9110 §6.4.1): no DATA byte may follow,
                // whatever their `content-length` says.
                if stream.headRequest || stream.status == 204 || stream.status == 304 { stream.contentLength = 0 }
                if endStream, !bodyLengthHolds(stream) { return }
                stream.phase = endStream ? .done : .body
                let headers = takeBlock()
                delegate?.h2(self, didReceiveResponse: id, status: stream.status, headers: headers, endStream: endStream)
                if endStream { complete(stream) }
            case .body:
                // A trailer section ends the stream (RFC 9113 §8.1): HEADERS in the middle of a body is malformed.
                guard endStream else { malformed(stream); return }
                guard bodyLengthHolds(stream) else { return }
                stream.phase = .done
                let trailers = takeBlock()
                delegate?.h2(self, didReceiveTrailers: id, trailers)
                complete(stream)
            case .trailers, .done:
                return
            }
        case NGHTTP2_DATA.rawValue:
            guard endStream, let stream = streams[id], !stream.malformed else { return }
            // END_STREAM before a final head (after an interim one: nghttp2 refuses DATA before any head) is malformed.
            guard stream.phase == .body else {
                if stream.phase == .head { malformed(stream) }
                return
            }
            guard bodyLengthHolds(stream) else { return }
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
        if UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, !heldHeads.isEmpty { releaseHead(frame.hd.stream_id) }
        guard UInt32(frame.hd.type) == NGHTTP2_GOAWAY.rawValue, frame.goaway.error_code != 0, closeReason == nil else { return }
        closeReason = "goaway_" + H2ErrorCode(rawValue: frame.goaway.error_code).description
    }

    func onData(_ streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let session else { return }
        // The connection window reopens at once: a stream whose client is slow holds only its own window.
        nghttp2_session_consume_connection(session, bytes.count)
        guard let stream = streams[streamID], !stream.malformed, stream.phase == .body else {
            nghttp2_session_consume_stream(session, streamID, bytes.count)
            // DATA after an interim head and before the final one (RFC 9113 §8.1).
            if let stream = streams[streamID], stream.phase == .head { malformed(stream) }
            return
        }
        stream.receivedBodyBytes += Int64(bytes.count)
        if let expected = stream.contentLength, stream.receivedBodyBytes > expected {
            // More DATA than `content-length` (RFC 9113 §8.1.1), or any after a head that has no content: never
            // forwarded.
            nghttp2_session_consume_stream(session, streamID, bytes.count)
            malformed(stream)
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
        resetBlock()
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
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, _, user in
            guard let frame else { return 0 }
            return H2ClientSession.with(user) { me in
                if UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue { me.releaseHead(frame.pointee.hd.stream_id) }
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
