import CNghttp2

/// `H2ServerSession`: turning received HEADERS and DATA into request events (RFC 9113 §8.1–8.3 checks), stream
/// closes, and what a sent frame means for its stream.
extension H2ServerSession {
    func onBeginHeaders(_ frame: nghttp2_frame) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, frame.headers.cat == NGHTTP2_HCAT_REQUEST else { return }
        streams[frame.hd.stream_id] = H2Stream(id: frame.hd.stream_id)
    }

    func onHeader(_ frame: nghttp2_frame, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
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
        // nghttp2 already validated; re-check what must never reach an HTTP/1.1 upstream. The value's bytes are not
        // scanned again: nghttp2 refuses exactly the bytes `HTTPSyntax.isFieldValueByte` refuses before this
        // callback runs (the stream is reset; `everyControlByteInAValueResetsTheStream` holds it to that), and the
        // scan was 2,000 instructions per request for an App Check token.
        guard !name.isEmpty, name.allSatisfy({ HTTPSyntax.isTChar($0) && !($0 >= 0x41 && $0 <= 0x5A) }),
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

    func onFrameReceived(_ frame: nghttp2_frame) {
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

    func finishRequest(_ stream: H2Stream, endStream: Bool) {
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

    func onData(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id], stream.announced, !stream.exceeded, !stream.rejected, closeReason == nil else {
            if let session { nghttp2_session_consume(session, id, bytes.count) }
            return
        }
        stream.unconsumed += bytes.count
        delegate?.h2(self, didReceiveData: id, bytes)
    }

    func onStreamClose(_ id: Int32, _ code: H2ErrorCode) {
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

    func onFrameSent(_ frame: nghttp2_frame) {
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
}
