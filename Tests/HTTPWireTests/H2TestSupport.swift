import CNghttp2
import Testing
@testable import HTTPWire

/// Records every delegate event; optionally answers and consumes automatically.
final class H2Recorder: H2SessionDelegate {
    var heads: [Int32: HTTPRequestHead] = [:]
    var requestOrder: [Int32] = []
    var endStreamOnHead: [Int32: Bool] = [:]
    var bodies: [Int32: [UInt8]] = [:]
    var ended: Set<Int32> = []
    var resets: [Int32: H2ErrorCode] = [:]
    var closed: Set<Int32> = []
    var exceeded: [Int32] = []
    var drainedStreams: [Int32] = []
    var goAways: [(H2ErrorCode, Int32)] = []
    /// Consume body bytes as soon as they arrive.
    var autoConsume = true
    /// Called for each request (e.g. to answer it).
    var onRequest: ((H2ServerSession, Int32, HTTPRequestHead, Bool) -> Void)?
    var onEnd: ((H2ServerSession, Int32) -> Void)?
    var onExceeded: ((H2ServerSession, Int32) -> Void)?

    func h2(_ session: H2ServerSession, didReceiveRequest streamID: Int32, head: HTTPRequestHead, endStream: Bool) {
        heads[streamID] = head
        requestOrder.append(streamID)
        endStreamOnHead[streamID] = endStream
        onRequest?(session, streamID, head, endStream)
    }
    func h2(_ session: H2ServerSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        bodies[streamID, default: []].append(contentsOf: bytes)
        if autoConsume { session.consume(streamID: streamID, bytes: bytes.count) }
    }
    func h2(_ session: H2ServerSession, didEndStream streamID: Int32) {
        ended.insert(streamID)
        onEnd?(session, streamID)
    }
    func h2(_ session: H2ServerSession, didResetStream streamID: Int32, errorCode: H2ErrorCode) {
        resets[streamID] = errorCode
    }
    func h2(_ session: H2ServerSession, didCloseStream streamID: Int32) { closed.insert(streamID) }
    func h2(_ session: H2ServerSession, didReceiveGoAway errorCode: H2ErrorCode, lastStreamID: Int32) {
        goAways.append((errorCode, lastStreamID))
    }
    func h2(_ session: H2ServerSession, streamExceededHeaderLimit streamID: Int32) {
        exceeded.append(streamID)
        onExceeded?(session, streamID)
    }
    func h2(_ session: H2ServerSession, didDrainOutput streamID: Int32) { drainedStreams.append(streamID) }
    var requestTrailers: [Int32: HTTPHeaders] = [:]
    func h2(_ session: H2ServerSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders) {
        requestTrailers[streamID] = trailers
    }
}

/// A client-side nghttp2 session used to drive the server in tests.
final class H2TestClient {
    struct Response {
        var status: Int?
        var headers: [(String, String)] = []
        var body: [UInt8] = []
        var closeCode: UInt32?
    }

    private(set) var session: OpaquePointer?
    var responses: [Int32: Response] = [:]
    var goAway: (code: UInt32, lastStreamID: Int32)?
    var rstReceived: [Int32: UInt32] = [:]
    /// When false, received DATA is not consumed until `consumeAll(max:)`.
    let autoWindow: Bool
    var unconsumed: [Int32: Int] = [:]
    private var uploads: [Int32: (bytes: [UInt8], offset: Int)] = [:]
    private var pendingUpload: (bytes: [UInt8], offset: Int)?

    init(autoWindow: Bool = true, peerMaxConcurrentStreams: UInt32? = nil, settings: [(Int32, UInt32)] = []) {
        self.autoWindow = autoWindow
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        if !autoWindow { nghttp2_option_set_no_auto_window_update(option, 1) }
        if let n = peerMaxConcurrentStreams { nghttp2_option_set_peer_max_concurrent_streams(option, n) }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nl, value, vl, _, user in
            let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
            let id = frame!.pointee.hd.stream_id
            let n = String(decoding: UnsafeRawBufferPointer(start: name, count: nl), as: UTF8.self)
            let v = String(decoding: UnsafeRawBufferPointer(start: value, count: vl), as: UTF8.self)
            if n == ":status" { me.responses[id, default: Response()].status = Int(v) } else {
                me.responses[id, default: Response()].headers.append((n, v))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { session, _, id, data, len, user in
            let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
            me.responses[id, default: Response()].body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: len))
            if !me.autoWindow { me.unconsumed[id, default: 0] += len }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, id, code, user in
            let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
            me.responses[id, default: Response()].closeCode = code
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
            let f = frame!.pointee
            if UInt32(f.hd.type) == NGHTTP2_GOAWAY.rawValue {
                me.goAway = (f.goaway.error_code, f.goaway.last_stream_id)
            } else if UInt32(f.hd.type) == NGHTTP2_RST_STREAM.rawValue {
                me.rstReceived[f.hd.stream_id] = f.rst_stream.error_code
            }
            return 0
        }
        var s: OpaquePointer?
        nghttp2_session_client_new2(&s, callbacks, Unmanaged.passUnretained(self).toOpaque(), option)
        session = s
        let entries = settings.map { nghttp2_settings_entry(settings_id: $0.0, value: $0.1) }
        nghttp2_submit_settings(s, 0, entries, entries.count)
    }

    deinit { nghttp2_session_del(session) }

    /// Submits a request; `body` nil → END_STREAM on HEADERS. Returns the stream id (negative on error).
    @discardableResult
    func request(_ headers: [(String, String)], body: [UInt8]? = nil) -> Int32 {
        var storage: [UInt8] = []
        var spans: [(Int, Int, Int, Int)] = []
        for (n, v) in headers {
            let ns = storage.count; storage.append(contentsOf: n.utf8)
            let vs = storage.count; storage.append(contentsOf: v.utf8)
            spans.append((ns, n.utf8.count, vs, v.utf8.count))
        }
        storage.append(0)
        return storage.withUnsafeMutableBufferPointer { raw in
            let base = raw.baseAddress!
            let nva = spans.map { nghttp2_nv(name: base + $0.0, value: base + $0.2, namelen: $0.1, valuelen: $0.3, flags: 0) }
            guard let body else { return nghttp2_submit_request(session, nil, nva, nva.count, nil, nil) }
            var provider = nghttp2_data_provider()
            provider.read_callback = { _, id, buf, length, flags, _, user in
                let me = Unmanaged<H2TestClient>.fromOpaque(user!).takeUnretainedValue()
                guard var up = me.uploads[id] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                let n = min(length, up.bytes.count - up.offset)
                up.bytes.withUnsafeBufferPointer { buf!.update(from: $0.baseAddress! + up.offset, count: n) }
                up.offset += n
                me.uploads[id] = up
                if up.offset == up.bytes.count { flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
                return n
            }
            let id = nghttp2_submit_request(session, nil, nva, nva.count, &provider, nil)
            if id > 0 { uploads[id] = (body, 0) }
            return id
        }
    }

    func resetStream(_ id: Int32, code: UInt32 = H2ErrorCode.cancel.rawValue) {
        nghttp2_submit_rst_stream(session, 0, id, code)
    }

    /// Consumes up to `max` bytes of received-but-unconsumed DATA per stream (window updates follow).
    func consumeAll(max: Int = .max) {
        for (id, n) in unconsumed where n > 0 {
            let c = min(n, max)
            nghttp2_session_consume(session, id, c)
            unconsumed[id] = n - c
        }
    }

    func output() -> [UInt8] {
        var out: [UInt8] = []
        while true {
            var p: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &p)
            if n <= 0 { break }
            out.append(contentsOf: UnsafeRawBufferPointer(start: p, count: n))
        }
        return out
    }

    @discardableResult
    func input(_ bytes: [UInt8]) -> Int {
        bytes.withUnsafeBytes { nghttp2_session_mem_recv(session, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), $0.count) }
    }
}

/// Shuttles bytes both ways until neither side produces anything. Returns the server statuses seen.
@discardableResult
func pump(_ client: H2TestClient, _ server: H2ServerSession, rounds: Int = 10_000,
          between: (() -> Void)? = nil) -> [H2Status] {
    var statuses: [H2Status] = []
    for _ in 0..<rounds {
        let up = client.output()
        if !up.isEmpty {
            let status = up.withUnsafeBytes { server.receive($0) }
            if status != .ok { statuses.append(status) }
        }
        var down: [UInt8] = []
        server.send(into: &down)
        if !down.isEmpty { client.input(down) }
        between?()
        if up.isEmpty && down.isEmpty { break }
    }
    return statuses
}

// MARK: - Raw frames

enum RawFrame {
    static let data: UInt8 = 0, headers: UInt8 = 1, rstStream: UInt8 = 3, settings: UInt8 = 4, ping: UInt8 = 6,
               goAway: UInt8 = 7, continuation: UInt8 = 9
    static let endStream: UInt8 = 0x1, endHeaders: UInt8 = 0x4, ack: UInt8 = 0x1

    static func make(_ type: UInt8, flags: UInt8 = 0, stream: Int32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        let n = payload.count
        var f: [UInt8] = [UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags]
        let s = UInt32(bitPattern: stream)
        f += [UInt8(s >> 24 & 0x7f), UInt8(s >> 16 & 0xff), UInt8(s >> 8 & 0xff), UInt8(s & 0xff)]
        return f + payload
    }

    /// HPACK for `GET / https` with `:authority: a` (static-table indices, literal without indexing).
    static let getBlock: [UInt8] = [0x82, 0x84, 0x87, 0x01, 0x01, UInt8(ascii: "a")]

    /// A literal header field without indexing, new name (`name` must be < 127 bytes).
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
    }

    static func uint32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }

    /// Preface + empty SETTINGS.
    static var clientStart: [UInt8] { H2ServerSession.clientPreface + make(settings) }

    /// Parses frames (type, flags, stream, payload) from server output.
    static func parse(_ bytes: [UInt8]) -> [(type: UInt8, flags: UInt8, stream: Int32, payload: [UInt8])] {
        var out: [(UInt8, UInt8, Int32, [UInt8])] = []
        var i = 0
        while i + 9 <= bytes.count {
            let n = Int(bytes[i]) << 16 | Int(bytes[i + 1]) << 8 | Int(bytes[i + 2])
            guard i + 9 + n <= bytes.count else { break }
            let s = Int32(bytes[i + 5] & 0x7f) << 24 | Int32(bytes[i + 6]) << 16 | Int32(bytes[i + 7]) << 8 | Int32(bytes[i + 8])
            out.append((bytes[i + 3], bytes[i + 4], s, Array(bytes[i + 9 ..< i + 9 + n])))
            i += 9 + n
        }
        return out
    }

    /// The error code of the first GOAWAY in `bytes`, if any.
    static func goAwayCode(_ bytes: [UInt8]) -> UInt32? {
        guard let f = parse(bytes).first(where: { $0.type == goAway }), f.payload.count >= 8 else { return nil }
        let p = f.payload
        return UInt32(p[4]) << 24 | UInt32(p[5]) << 16 | UInt32(p[6]) << 8 | UInt32(p[7])
    }
}

func drain(_ server: H2ServerSession) -> [UInt8] {
    var out: [UInt8] = []
    server.send(into: &out)
    return out
}

func pattern(_ count: Int, seed: UInt32 = 1) -> [UInt8] {
    var x = seed
    return (0..<count).map { _ in
        x = x &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: x >> 24)
    }
}

let getHeaders: [(String, String)] = [(":method", "GET"), (":scheme", "https"), (":authority", "example.com"), (":path", "/hello?x=1")]
