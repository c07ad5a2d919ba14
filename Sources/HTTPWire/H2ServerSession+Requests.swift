import CNghttp2

/// `H2ServerSession`: turning received HEADERS and DATA into request events (RFC 9113 §8.1–8.3 checks), stream
/// closes, and what a sent frame means for its stream.
extension H2ServerSession {
    func onBeginHeaders(_ frame: nghttp2_frame) {
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, frame.headers.cat == NGHTTP2_HCAT_REQUEST else { return }
        streams[frame.hd.stream_id] = H2Stream(id: frame.hd.stream_id)
        // The pseudo-fields of this header block go into the reused buffer (kept unless a long one grew it).
        if pseudoBytes.capacity > 4096 { pseudoBytes = [] } else { pseudoBytes.removeAll(keepingCapacity: true) }
        pseudoOwner = frame.hd.stream_id
    }

    func onHeader(_ frame: nghttp2_frame, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        if UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, frame.headers.cat == NGHTTP2_HCAT_HEADERS {
            onTrailer(frame, name, value)
            return
        }
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
            guard stream.fields.isEmpty, stream.cookie == nil, stream.hostValue == nil, pseudoOwner == stream.id else {
                reject(stream)
                return
            }
            // False for a repeated one. (The stream is rejected after the slot's access ends: `reject` clears it.)
            func setOnce(_ slot: inout Range<Int32>?) -> Bool {
                guard slot == nil else { return false }
                if pseudoBytes.capacity == 0 { pseudoBytes.reserveCapacity(256) }
                let start = pseudoBytes.count
                pseudoBytes.appendBytes(value)
                slot = Int32(clamping: start)..<Int32(clamping: pseudoBytes.count)
                return true
            }
            let stored = switch name.count {
            case 5 where HTTPSyntax.equalsLowercased(name, ":path"): setOnce(&stream.path)
            case 7 where HTTPSyntax.equalsLowercased(name, ":method"): setOnce(&stream.method)
            case 7 where HTTPSyntax.equalsLowercased(name, ":scheme"): setOnce(&stream.scheme)
            case 10 where HTTPSyntax.equalsLowercased(name, ":authority"): setOnce(&stream.authority)
            default: false // :protocol (extended CONNECT is not enabled) or unknown
            }
            if !stored { reject(stream) }
            return
        }
        // RFC 9113 §8.2.1: a name of lower-case token characters; a value of field-value bytes (RFC 9110 §5.5: no
        // CR, LF, NUL nor other control byte but HTAB) with no leading or trailing whitespace. These are the session's
        // own checks (nghttp2's HTTP messaging is off, see `init`): the word-at-a-time `isFieldValue` is about a fifth
        // of nghttp2's byte-by-byte check on an App Check token.
        guard !name.isEmpty, name.allSatisfy({ HTTPSyntax.isTChar($0) && !($0 >= 0x41 && $0 <= 0x5A) }),
              !HTTPSyntax.isWhitespace(value.first ?? 0x21), !HTTPSyntax.isWhitespace(value.last ?? 0x21),
              HTTPSyntax.isFieldValue(value) else {
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
            guard stream.hostValue == nil, !value.isEmpty, H2ServerSession.isAuthority(value) else { reject(stream); return }
            stream.hostValue = Array(value)
        } else if HTTPSyntax.equalsLowercased(name, "content-length") {
            // One `content-length` only, as nghttp2 held it (a repeated one, even with the same value, is malformed).
            guard let n = H2ServerSession.parseContentLength(value), stream.contentLength == nil else {
                reject(stream)
                return
            }
            stream.contentLength = n
        } else if HTTPSyntax.equalsLowercased(name, "expect"), HTTPSyntax.equalsLowercased(value, "100-continue") {
            stream.expectContinue = true
        }
        stream.appendField(name, value)
    }

    /// A field of a request's trailer section (RFC 9113 §8.1): kept for `didReceiveTrailers` within the same header
    /// limits as the head (counted apart); past them the trailers are dropped. A malformed trailer section (a pseudo
    /// field, an upper-case name, a connection-specific field, `te` other than `trailers`, RFC 9113 §8.1.1 and §8.2)
    /// resets the stream; a field that is only not valid HTTP (another name or value byte) drops the trailers.
    func onTrailer(_ frame: nghttp2_frame, _ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        guard let stream = streams[frame.hd.stream_id], stream.announced, !stream.rejected, !stream.exceeded,
              !stream.trailersDropped else { return }
        if name.first == UInt8(ascii: ":") || name.contains(where: { $0 >= 0x41 && $0 <= 0x5A })
            || HTTPHeaderName.isConnectionSpecific(name)
            || (name.count == 2 && HTTPSyntax.equalsLowercased(name, "te") && !HTTPSyntax.equalsLowercased(value, "trailers")) {
            reject(stream)
            return
        }
        stream.trailerBytes += name.count + value.count + 4
        guard stream.trailerBytes <= limits.maxHeaderListBytes, stream.trailerFields.count < limits.maxHeaders,
              !name.isEmpty, name.allSatisfy(HTTPSyntax.isTChar), HTTPSyntax.isFieldValue(value),
              !HTTPSyntax.isWhitespace(value.first ?? 0x21), !HTTPSyntax.isWhitespace(value.last ?? 0x21) else {
            stream.trailersDropped = true
            stream.trailerBlock = []
            stream.trailerFields = []
            return
        }
        let nameStart = stream.trailerBlock.count
        stream.trailerBlock.appendBytes(name)
        let nameEnd = stream.trailerBlock.count
        stream.trailerBlock.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
        let valueStart = stream.trailerBlock.count
        stream.trailerBlock.appendBytes(value)
        let valueEnd = stream.trailerBlock.count
        stream.trailerBlock.append(contentsOf: [13, 10])
        stream.trailerFields.append(HTTPHeaderField(
            nameStart: Int32(clamping: nameStart), nameEnd: Int32(clamping: nameEnd),
            valueStart: Int32(clamping: valueStart), valueEnd: Int32(clamping: valueEnd)))
    }

    /// A URI scheme (RFC 3986 §3.1): a letter, then letters, digits, `+`, `-` and `.`.
    static func isScheme(_ value: UnsafeRawBufferPointer) -> Bool {
        guard let first = value.first, (first | 0x20) >= 0x61, (first | 0x20) <= 0x7A else { return false }
        return value.allSatisfy { byte in
            let letter = (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A
            return letter || (byte >= 0x30 && byte <= 0x39) || byte == 0x2B || byte == 0x2D || byte == 0x2E
        }
    }

    /// Bytes an `:authority` or `host` may hold (RFC 3986 §3.2: unreserved, sub-delims but `*`, `%`, `:`, `@`, `[`,
    /// `]`), the set nghttp2's HTTP messaging held them to. Userinfo (`@`) is refused apart, for `:authority`.
    static func isAuthority(_ value: UnsafeRawBufferPointer) -> Bool {
        value.allSatisfy { byte in
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
            case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"),
                 UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
                 UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: "%"),
                 UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "["), UInt8(ascii: "]"): true
            default: false
            }
        }
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
            } else if !endStream {
                // A trailer section ends the stream (RFC 9113 §8.1); HEADERS in the middle of a body is malformed.
                reject(stream)
            } else if stream.announced, !stream.exceeded, !stream.rejected, closeReason == nil, bodyLengthHolds(stream) {
                if let trailers = stream.takeRequestTrailers() { delegate?.h2(self, didReceiveTrailers: id, trailers) }
                delegate?.h2(self, didEndStream: id)
            }
        case NGHTTP2_DATA.rawValue:
            guard let stream = streams[id] else { return }
            if endStream {
                stream.remoteEnded = true
                if stream.announced, !stream.exceeded, !stream.rejected, closeReason == nil, bodyLengthHolds(stream) {
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

    /// At the end of a request body: whether the DATA received matches `content-length` (RFC 9113 §8.1.1); when it
    /// does not, the stream is reset (PROTOCOL_ERROR) and the delegate learns it by `didResetStream`.
    private func bodyLengthHolds(_ stream: H2Stream) -> Bool {
        guard let expected = stream.contentLength, stream.receivedBodyBytes != expected else { return true }
        reject(stream)
        return false
    }

    func finishRequest(_ stream: H2Stream, endStream: Bool) {
        guard !stream.rejected, !stream.announced, closeReason == nil else { return }
        if stream.exceeded {
            stream.announced = true
            delegate?.h2(self, streamExceededHeaderLimit: stream.id)
            return
        }
        // The pseudo-fields were kept in `pseudoBytes` while this header block was read (`onBeginHeaders`).
        guard pseudoOwner == stream.id else { reject(stream); return }
        let pseudo = pseudoBytes
        guard let head = pseudo.withUnsafeBytes({ requestHead(stream, endStream: endStream, pseudo: $0) }) else { return }
        stream.announced = true
        stream.dropHeadState()
        delegate?.h2(self, didReceiveRequest: stream.id, head: head, endStream: endStream)
    }

    /// The request head of `stream` (its pseudo-fields' values in `pseudo`), or nil when the stream was rejected.
    private func requestHead(_ stream: H2Stream, endStream: Bool, pseudo: UnsafeRawBufferPointer) -> HTTPRequestHead? {
        func bytes(_ range: Range<Int32>) -> UnsafeRawBufferPointer {
            UnsafeRawBufferPointer(rebasing: pseudo[Int(range.lowerBound)..<Int(range.upperBound)])
        }
        guard let methodRange = stream.method, !methodRange.isEmpty, HTTPSyntax.isToken(bytes(methodRange)) else {
            reject(stream)
            return nil
        }
        // The common methods are literals (no decoding, no storage).
        let method = HTTPRequestHeadParser.methodString(bytes(methodRange))
        if method == "CONNECT" {
            reject(stream, .refusedStream)
            return nil
        }
        guard let pathRange = stream.path, !pathRange.isEmpty, let schemeRange = stream.scheme,
              H2ServerSession.isScheme(bytes(schemeRange)) else {
            reject(stream)
            return nil
        }
        // A request whose HEADERS end the stream has no body: a `content-length` other than 0 is malformed.
        if endStream, let expected = stream.contentLength, expected != 0 {
            reject(stream)
            return nil
        }
        let path = bytes(pathRange)
        guard path.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }),
              path[0] == UInt8(ascii: "/") || (path.count == 1 && path[0] == UInt8(ascii: "*") && method == "OPTIONS") else {
            reject(stream)
            return nil
        }
        let authority = stream.authority.map(bytes)
        if let authority {
            guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")), H2ServerSession.isAuthority(authority) else {
                reject(stream)
                return nil
            }
            if let host = stream.hostValue {
                guard host.count == authority.count,
                      zip(host, authority).allSatisfy({ HTTPSyntax.lowercased($0) == HTTPSyntax.lowercased($1) }) else {
                    reject(stream)
                    return nil
                }
            } else {
                let name: StaticString = "host"
                stream.appendField(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), authority)
            }
        }
        let host: String
        if let authority { host = String(decoding: authority, as: UTF8.self) } else if let hostValue = stream.hostValue {
            host = String(decoding: hostValue, as: UTF8.self)
        } else {
            reject(stream)
            return nil
        }
        if let cookie = stream.cookie {
            let name: StaticString = "cookie"
            cookie.withUnsafeBytes {
                stream.appendField(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), $0)
            }
        }
        let framing: RequestBodyFraming
        if let n = stream.contentLength { framing = .contentLength(n) } else { framing = endStream ? .none : .chunked }
        return HTTPRequestHead(
            method: method, target: String(decoding: path, as: UTF8.self), versionMinor: 1,
            headers: HTTPHeaders(validatedBytes: stream.block, fields: stream.fields),
            framing: framing, keepAlive: true, expectContinue: stream.expectContinue,
            connectionTokens: [], host: host)
    }

    func onData(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id], stream.announced, !stream.exceeded, !stream.rejected, closeReason == nil else {
            if let session { nghttp2_session_consume(session, id, bytes.count) }
            return
        }
        stream.receivedBodyBytes += Int64(bytes.count)
        if let expected = stream.contentLength, stream.receivedBodyBytes > expected {
            // More DATA than `content-length` (RFC 9113 §8.1.1): never forwarded.
            if let session { nghttp2_session_consume(session, id, bytes.count) }
            reject(stream)
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
