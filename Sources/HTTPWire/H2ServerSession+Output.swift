import CNghttp2

/// `H2ServerSession`: nghttp2 pulling response body bytes from a stream's buffer (DATA frames), with the low-watermark
/// bookkeeping behind `didDrainOutput`.
extension H2ServerSession {
    func readData(_ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
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
