import CNghttp2

/// `H2ServerSession`: nghttp2 pulling response body bytes from a stream's buffer (DATA frames), with the low-watermark
/// bookkeeping behind `didDrainOutput`.
extension H2ServerSession {
    func readData(_ id: Int32, _ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int,
                  _ flags: UnsafeMutablePointer<UInt32>?) -> Int {
        guard let stream = streams[id], let buffer else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        return H2OutgoingBodySource.read(stream, id: id, session: session, into: buffer, length: length, flags: flags,
                                         lowWatermark: limits.outputLowWatermark,
                                         totalBufferedBytes: &totalBufferedBytes, drained: &drained)
    }
}
