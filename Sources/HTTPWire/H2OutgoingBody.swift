import CNghttp2

/// The body one side of a stream sends (a server's response, a client's request), as both sessions keep it: bytes
/// queued by `sendData` and pulled by nghttp2 as flow control allows, then END_STREAM or trailers.
protocol H2OutgoingBody: AnyObject {
    var out: [UInt8] { get set }
    var outOffset: Int { get set }
    /// No more body will be queued (END_STREAM, or the trailers, after `out`).
    var endQueued: Bool { get }
    /// Trailers sent after the last DATA instead of END_STREAM on it.
    var trailers: H2HeaderList? { get set }
    /// nghttp2 was told to wait (`NGHTTP2_ERR_DEFERRED`) until more is queued.
    var deferred: Bool { get set }
    /// Above the output low watermark since it last fell under it (the owner hears `didDrainOutput` then).
    var aboveLowWatermark: Bool { get set }
}

enum H2OutgoingBodySource {
    /// nghttp2's `read_callback` for `stream`: copies up to `length` queued bytes into `buffer`, sets EOF (and submits
    /// the trailers) once the body is complete, defers when nothing is queued yet. A stream falling under
    /// `lowWatermark` is appended to `drained`; `totalBufferedBytes` is the session's count of queued bytes.
    @inline(__always)
    static func read<Body: H2OutgoingBody>(_ stream: Body, id: Int32, session: OpaquePointer?,
                                           into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                                           flags: UnsafeMutablePointer<UInt32>?, lowWatermark: Int,
                                           totalBufferedBytes: inout Int, drained: inout [Int32]) -> Int {
        let n = min(length, stream.out.count - stream.outOffset)
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
        let buffered = stream.out.count - stream.outOffset
        if stream.aboveLowWatermark, buffered < lowWatermark {
            stream.aboveLowWatermark = false
            drained.append(id)
        }
        if buffered == 0 {
            if stream.endQueued {
                flags?.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                if let trailers = stream.trailers, let session {
                    // The trailers follow the last DATA, which then does not end the stream (RFC 9113 §8.1).
                    stream.trailers = nil
                    flags?.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                    let rv = trailers.withNV(pseudo: []) { nva in
                        nghttp2_submit_trailer(session, id, nva.baseAddress, nva.count)
                    }
                    if rv != 0 { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                }
            } else if n == 0 {
                stream.deferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        return n
    }
}

extension H2ErrorCode {
    /// The GOAWAY code for an error `nghttp2_session_mem_recv` returned.
    static func forReceiveError(_ rv: Int) -> H2ErrorCode {
        switch Int32(rv) {
        case NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue, NGHTTP2_ERR_FLOODED.rawValue: return .enhanceYourCalm
        case NGHTTP2_ERR_NOMEM.rawValue, NGHTTP2_ERR_CALLBACK_FAILURE.rawValue: return .internalError
        default: return .protocolError
        }
    }
}
