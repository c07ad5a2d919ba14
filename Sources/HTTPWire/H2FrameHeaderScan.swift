/// Walks the frame headers of a client's HTTP/2 byte stream beside nghttp2, to count what nghttp2 drops without a
/// callback: a DATA frame with no data and without END_STREAM on a stream that is already closed is ignored silently
/// (no `on_frame_recv`, no `on_begin_frame`), so a client could send them without end (CVE-2019-9518, "empty frames
/// flood"; issue 39: 443.8 M in 20 s on one connection, never closed). The scan reads the same bytes from the
/// client preface on, so it stays in step with nghttp2's framing; it looks at 9 header bytes per frame and steps
/// over payloads whole.
struct H2FrameHeaderScan {
    /// Bytes of the client preface (`PRI * HTTP/2.0…`, 24 bytes) still to step over.
    private var prefaceLeft = H2ServerSession.clientPreface.count
    /// Payload bytes of the current frame still to step over.
    private var payloadLeft = 0
    /// Header bytes of the next frame read so far (0…8), and what they said.
    private var headerRead = 0
    private var length = 0
    private var type: UInt8 = 0
    private var flags: UInt8 = 0

    /// Reads `bytes` (the next bytes of the connection, in order); returns how many DATA frames whose header
    /// completed in them carry no data (no payload, or only a pad length of 0) and do not end their stream.
    mutating func scan(_ bytes: UnsafeRawBufferPointer) -> Int {
        var found = 0
        var i = 0
        let n = bytes.count
        while i < n {
            if prefaceLeft > 0 {
                let k = min(prefaceLeft, n - i)
                prefaceLeft -= k
                i += k
                continue
            }
            if payloadLeft > 0 {
                let k = min(payloadLeft, n - i)
                payloadLeft -= k
                i += k
                continue
            }
            let byte = bytes[i]
            i += 1
            switch headerRead {
            case 0, 1, 2: length = length << 8 | Int(byte)
            case 3: type = byte
            case 4: flags = byte
            default: break  // the stream identifier
            }
            headerRead += 1
            guard headerRead == 9 else { continue }
            // DATA (0) without END_STREAM (0x1): empty, or PADDED (0x8) with only its pad length byte.
            if type == 0 && flags & 0x1 == 0 && (length == 0 || (flags & 0x8 != 0 && length == 1)) { found += 1 }
            payloadLeft = length
            headerRead = 0
            length = 0
        }
        return found
    }
}
