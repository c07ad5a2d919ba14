import CNghttp2

/// `H2ServerSession`: flow control of request bodies, responses (heads, 100-continue, bodies), resets and GOAWAY.
extension H2ServerSession {
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
        var list = H2HeaderList(capacity: 256)
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
        var list = H2HeaderList(capacity: 256)
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

    /// Ends the response of `streamID` with trailer fields (a trailing HEADERS frame with END_STREAM after the body
    /// queued so far, RFC 9113 §8.1); names are lower-cased and connection-specific fields dropped (`H2HeaderList`).
    /// An empty list ends the response like `sendData(..., endStream: true)`. False when the stream is gone, has no
    /// head with a body, or was ended.
    @discardableResult
    public func sendTrailers(streamID: Int32, _ trailers: H2HeaderList) -> Bool {
        guard !trailers.isEmpty else {
            return sendData(streamID: streamID, UnsafeRawBufferPointer(start: nil, count: 0), endStream: true)
        }
        guard let session, let stream = streams[streamID], stream.headSent, stream.hasBody, !stream.endQueued else {
            return false
        }
        stream.trailers = trailers
        stream.endQueued = true
        if stream.deferred {
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
}
