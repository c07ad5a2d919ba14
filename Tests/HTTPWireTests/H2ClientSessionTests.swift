import CNghttp2
import Testing
@testable import HTTPWire

/// Records every event of an `H2ClientSession`.
final class H2ClientRecorder: H2ClientSessionDelegate {
    var heads: [Int32: (status: Int, headers: HTTPHeaders, endStream: Bool)] = [:]
    var bodies: [Int32: [UInt8]] = [:]
    var trailers: [Int32: HTTPHeaders] = [:]
    var completed: [Int32] = []
    var failed: [Int32: H2StreamFailure] = [:]
    var goAways: [Int32] = []
    var autoConsume = true

    func h2(_ session: H2ClientSession, didReceiveResponse streamID: Int32, status: Int, headers: HTTPHeaders,
            endStream: Bool) { heads[streamID] = (status, headers, endStream) }
    func h2(_ session: H2ClientSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        bodies[streamID, default: []].append(contentsOf: bytes)
        if autoConsume { session.consume(streamID: streamID, bytes: bytes.count) }
    }
    func h2(_ session: H2ClientSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders) {
        self.trailers[streamID] = trailers
    }
    func h2(_ session: H2ClientSession, didCompleteStream streamID: Int32) { completed.append(streamID) }
    func h2(_ session: H2ClientSession, didFailStream streamID: Int32, _ failure: H2StreamFailure) {
        failed[streamID] = failure
    }
    func h2(_ session: H2ClientSession, didReceiveGoAway errorCode: H2ErrorCode, lastStreamID: Int32) {
        goAways.append(lastStreamID)
    }
}

/// `H2ClientSession`, the gateway's side of `protocol: h2` upstreams: against the gateway's own server session (nghttp2
/// on both ends), and against hand-made hostile frames.
@Suite struct H2ClientSessionTests {
    /// Moves bytes both ways until neither side has anything more to say.
    static func pump(_ client: H2ClientSession, _ server: H2ServerSession) {
        for _ in 0..<50 {
            var toServer: [UInt8] = []
            var toClient: [UInt8] = []
            client.send(into: &toServer)
            if !toServer.isEmpty { _ = toServer.withUnsafeBytes { server.receive($0) } }
            server.send(into: &toClient)
            if !toClient.isEmpty { _ = toClient.withUnsafeBytes { client.receive($0) } }
            if toServer.isEmpty && toClient.isEmpty { return }
        }
    }

    static func fields(_ h: HTTPHeaders) -> [String] {
        (0..<h.count).map { "\(h.name(at: $0)): \(h.value(at: $0))" }
    }

    @Test func requestAndResponseWithTrailersBothWays() {
        let server = H2Recorder()
        server.onEnd = { s, id in
            s.sendResponseHead(streamID: id, status: 200, headers: [("content-type", "text/plain")], endStream: false)
            s.sendData(streamID: id, Array("pong".utf8), endStream: false)
            var t = H2HeaderList()
            t.add("grpc-status", "0")
            s.sendTrailers(streamID: id, t)
        }
        let serverSession = H2ServerSession(delegate: server)
        let recorder = H2ClientRecorder()
        let client = H2ClientSession(delegate: recorder)
        var list = H2HeaderList()
        list.add("Content-Type", "application/grpc")
        list.add("Connection", "close")
        list.addTETrailers()
        let id = client.submitRequest(method: "POST", scheme: "http", authority: "up", path: "/svc/M", headers: list,
                                      endStream: false)
        #expect(id == 1)
        // The bytes are valid only inside the closure (a pointer escaped from it dangles).
        Array("ping".utf8).withUnsafeBytes { _ = client.sendData(streamID: 1, $0, endStream: false) }
        var t = H2HeaderList()
        t.add("x-req", "done")
        #expect(client.sendTrailers(streamID: 1, t))
        Self.pump(client, serverSession)
        let head = server.heads[1]
        #expect(head?.method == "POST")
        #expect(head?.target == "/svc/M")
        #expect(head.map { Self.fields($0.headers) }?.contains("te: trailers") == true)
        #expect(server.bodies[1] == Array("ping".utf8))
        #expect(server.requestTrailers[1].map(Self.fields) == ["x-req: done"])
        #expect(recorder.heads[1]?.status == 200)
        #expect(recorder.bodies[1] == Array("pong".utf8))
        #expect(recorder.trailers[1].map(Self.fields) == ["grpc-status: 0"])
        #expect(recorder.completed == [1])
        #expect(client.activeStreamCount == 0)
    }

    /// A response head over `maxHeaderListBytes` resets its stream (`malformed`); the connection goes on.
    @Test func oversizedResponseHeadIsMalformed() {
        let server = H2Recorder()
        server.onRequest = { s, id, _, _ in
            s.sendResponseHead(streamID: id, status: 200, headers: (0..<8).map { ("x-\($0)", String(repeating: "v", count: 4000)) },
                               endStream: true)
        }
        let serverSession = H2ServerSession(delegate: server)
        let recorder = H2ClientRecorder()
        let client = H2ClientSession(limits: H2Limits(maxHeaderListBytes: 16 * 1024), delegate: recorder)
        _ = client.submitRequest(method: "GET", scheme: "http", authority: "a", path: "/", headers: H2HeaderList(),
                                 endStream: true)
        Self.pump(client, serverSession)
        #expect(recorder.failed[1] == .malformed)
        #expect(recorder.heads[1] == nil)
        #expect(client.canOpenStream)
    }

    /// A server that keeps a stream's window closed holds the request body in the session; its bytes stay queued (the
    /// caller's bound), nothing is lost, and a reset frees them.
    @Test func windowNeverGrantedKeepsBodyQueued() {
        let server = H2Recorder()
        server.autoConsume = false
        let serverSession = H2ServerSession(limits: H2Limits(initialWindowSize: 0), delegate: server)
        let recorder = H2ClientRecorder()
        let client = H2ClientSession(delegate: recorder)
        Self.pump(client, serverSession)
        let id = client.submitRequest(method: "POST", scheme: "http", authority: "a", path: "/", headers: H2HeaderList(),
                                      endStream: false)!
        let body = [UInt8](repeating: 1, count: 100_000)
        body.withUnsafeBytes { _ = client.sendData(streamID: id, $0, endStream: true) }
        Self.pump(client, serverSession)
        #expect(server.bodies[id] == nil)
        #expect(client.bufferedBytes(streamID: id) == 100_000)
        client.resetStream(streamID: id, code: .cancel)
        #expect(client.totalBufferedBytes == 0)
        #expect(recorder.failed.isEmpty, "a stream the caller reset is not reported")
    }

    /// Hostile bytes: a malformed frame (a SETTINGS frame whose length is not a multiple of 6) ends the session;
    /// `close` then fails the open streams.
    @Test func garbageEndsTheSession() {
        let recorder = H2ClientRecorder()
        let client = H2ClientSession(delegate: recorder)
        _ = client.submitRequest(method: "GET", scheme: "http", authority: "a", path: "/", headers: H2HeaderList(),
                                 endStream: true)
        client.send { _ in }
        let garbage: [UInt8] = [0, 0, 5, 4, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5]
        if case .closeConnection = garbage.withUnsafeBytes({ client.receive($0) }) {} else { client.send { _ in } }
        #expect(client.terminationReason == "goaway_frame_size_error")
        #expect(client.isFinished)
        client.close()
        #expect(recorder.failed[1] == .connectionClosed)
    }

    /// Endless CONTINUATION frames after a HEADERS frame end the session after `maxContinuations` (bounded memory).
    @Test func continuationFloodEndsTheSession() {
        let recorder = H2ClientRecorder()
        let client = H2ClientSession(delegate: recorder)
        _ = client.submitRequest(method: "GET", scheme: "http", authority: "a", path: "/", headers: H2HeaderList(),
                                 endStream: true)
        client.send { _ in }
        var bytes: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]  // the server's empty SETTINGS
        // HEADERS on stream 1 without END_HEADERS, ":status: 200" (HPACK static index 8).
        bytes += [0, 0, 1, 1, 0, 0, 0, 0, 1, 0x88]
        for _ in 0..<100 {
            // CONTINUATION without END_HEADERS, each carrying a literal header "x: y" (not indexed).
            bytes += [0, 0, 5, 9, 0, 0, 0, 0, 1, 0x00, 1, UInt8(ascii: "x"), 1, UInt8(ascii: "y")]
        }
        let status = bytes.withUnsafeBytes { client.receive($0) }
        guard case .closeConnection = status else {
            Issue.record("flood accepted: \(status)")
            return
        }
        client.close()
        #expect(recorder.failed[1] == .connectionClosed)
        #expect(recorder.heads.isEmpty)
    }

    /// GOAWAY: streams above its last stream id are refused (safe to send again); none may be opened after it.
    @Test func goAwayRefusesLaterStreams() {
        let server = H2Recorder()
        let serverSession = H2ServerSession(delegate: server)
        let recorder = H2ClientRecorder()
        let client = H2ClientSession(delegate: recorder)
        for path in ["/a", "/b"] {
            _ = client.submitRequest(method: "GET", scheme: "http", authority: "a", path: path, headers: H2HeaderList(),
                                     endStream: true)
        }
        Self.pump(client, serverSession)
        // A GOAWAY naming stream 1 only, written by hand (the server session would name the last one it processed).
        let goaway: [UInt8] = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        _ = goaway.withUnsafeBytes { client.receive($0) }
        #expect(recorder.goAways == [1])
        #expect(recorder.failed[3] == .refused)
        #expect(!client.canOpenStream)
        #expect(client.submitRequest(method: "GET", scheme: "http", authority: "a", path: "/c", headers: H2HeaderList(),
                                     endStream: true) == nil)
    }

    // MARK: the session's own checks of responses (nghttp2's HTTP messaging is off)

    static func h(_ block: [UInt8], end: Bool = false) -> [UInt8] {
        RawFrame.make(RawFrame.headers, flags: RawFrame.endHeaders | (end ? RawFrame.endStream : 0), stream: 1, block)
    }

    static func d(_ payload: String, end: Bool = false) -> [UInt8] {
        RawFrame.make(RawFrame.data, flags: end ? RawFrame.endStream : 0, stream: 1, Array(payload.utf8))
    }

    static func f(_ name: String, _ value: String) -> [UInt8] { RawFrame.literal(name, value) }
    static func cl(_ value: String) -> [UInt8] { RawFrame.literal("content-length", value) }
    /// `:status` 200 and 204 (HPACK static table, indices 8 and 9), and any other as a literal.
    static let ok: [UInt8] = [0x88], noContent: [UInt8] = [0x89]
    static func status(_ code: String) -> [UInt8] { RawFrame.literal(":status", code) }

    /// Stream 1 of a request with `method` gets the server's SETTINGS and `frames`: what the delegate saw, and the error
    /// code of the RST_STREAM the session sent for it.
    static func respond(_ method: String, _ frames: [UInt8]) -> (recorder: H2ClientRecorder, reset: [UInt8]?) {
        let recorder = H2ClientRecorder()
        let client = H2ClientSession(delegate: recorder)
        _ = client.submitRequest(method: method, scheme: "http", authority: "a", path: "/", headers: H2HeaderList(),
                                 endStream: true)
        client.send { _ in }
        let input = RawFrame.make(RawFrame.settings) + frames
        _ = input.withUnsafeBytes { client.receive($0) }
        var out: [UInt8] = []
        client.send(into: &out)
        return (recorder, RawFrame.parse(out).first { $0.type == RawFrame.rstStream && $0.stream == 1 }?.payload)
    }

    /// One rule of RFC 9113 §8.1.1, §8.2, §8.3.2 broken in each (the rules nghttp2's HTTP messaging held responses to,
    /// and the fields it only dropped): a stream error before the head is delivered (`headFirst` false), or after it
    /// (the DATA or the trailers); `EXCESS` marks what must never be delivered.
    static let malformedResponses: [(String, String, [UInt8], Bool)] = [
        ("no :status", "GET", h(f("x", "y"), end: true), false),
        (":status twice", "GET", h(ok + ok, end: true), false),
        (":status after a field", "GET", h(f("x", "y") + ok, end: true), false),
        (":status of two digits", "GET", h(status("20"), end: true), false),
        (":status not digits", "GET", h(status("2x0"), end: true), false),
        (":status below 100", "GET", h(status("099"), end: true), false),
        ("upper-case :Status", "GET", h(f(":Status", "200"), end: true), false),
        ("101", "GET", h(status("101"), end: true), false),
        ("a request's pseudo field", "GET", h(ok + f(":path", "/"), end: true), false),
        ("an unknown pseudo field", "GET", h(ok + f(":x", "1"), end: true), false),
        ("upper-case name", "GET", h(ok + f("X-Up", "1"), end: true), false),
        ("space in a name", "GET", h(ok + f("x y", "1"), end: true), false),
        ("empty name", "GET", h(ok + f("", "1"), end: true), false),
        ("colon in a name", "GET", h(ok + f("x:y", "1"), end: true), false),
        ("NUL in a value", "GET", h(ok + f("x", "a\u{0}b"), end: true), false),
        ("CR in a value", "GET", h(ok + f("x", "a\rb"), end: true), false),
        ("LF in a value", "GET", h(ok + f("x", "a\nb"), end: true), false),
        ("DEL in a value", "GET", h(ok + f("x", "a\u{7F}b"), end: true), false),
        ("leading space", "GET", h(ok + f("x", " a"), end: true), false),
        ("trailing tab", "GET", h(ok + f("x", "a\t"), end: true), false),
        ("connection", "GET", h(ok + f("connection", "close"), end: true), false),
        ("keep-alive", "GET", h(ok + f("keep-alive", "1"), end: true), false),
        ("proxy-connection", "GET", h(ok + f("proxy-connection", "close"), end: true), false),
        ("transfer-encoding", "GET", h(ok + f("transfer-encoding", "chunked"), end: true), false),
        ("upgrade", "GET", h(ok + f("upgrade", "h2c"), end: true), false),
        ("te other than trailers", "GET", h(ok + f("te", "gzip"), end: true), false),
        ("two equal content-lengths", "GET", h(ok + cl("2") + cl("2")) + d("ok", end: true), false),
        ("content-length not a number", "GET", h(ok + cl("1x")) + d("x", end: true), false),
        ("empty content-length", "GET", h(ok + cl("")) + d("", end: true), false),
        ("content-length on a head ending the stream", "GET", h(ok + cl("5"), end: true), false),
        ("content-length 1 in a 204", "GET", h(noContent + cl("1"), end: true), false),
        ("content-length in an interim head", "GET", h(status("103") + cl("0")) + h(ok, end: true), false),
        ("interim head ending the stream", "GET", h(status("103"), end: true), false),
        ("DATA after an interim head", "GET", h(status("103")) + d("EXCESS", end: true), false),
        ("END_STREAM after an interim head", "GET", h(status("100")) + d("", end: true), false),
        ("DATA over content-length", "GET", h(ok + cl("2")) + d("okEXCESS", end: true), true),
        ("DATA under content-length", "GET", h(ok + cl("10")) + d("ok", end: true), true),
        ("DATA after a 204", "GET", h(noContent) + d("EXCESS", end: true), true),
        ("DATA after a 304", "GET", h(status("304") + cl("6")) + d("EXCESS", end: true), true),
        ("DATA to HEAD", "HEAD", h(ok + cl("6")) + d("EXCESS", end: true), true),
        ("trailers without END_STREAM", "GET", h(ok) + d("ok") + h(f("x-t", "EXCESS")) + d("", end: true), true),
        ("pseudo field in trailers", "GET", h(ok) + d("ok") + h(ok + f("x-t", "EXCESS"), end: true), true),
        ("upper-case trailer", "GET", h(ok) + d("ok") + h(f("X-T", "EXCESS"), end: true), true),
        ("connection-specific trailer", "GET", h(ok) + d("ok") + h(f("x-t", "EXCESS") + f("connection", "close"), end: true), true),
        ("control byte in a trailer", "GET", h(ok) + d("ok") + h(f("x-t", "EXCESS\u{1}"), end: true), true),
        ("content-length in the trailers too", "GET", h(ok + cl("2")) + d("ok") + h(f("x-t", "EXCESS") + cl("2"), end: true), true),
        ("trailers' content-length not the DATA's", "GET", h(ok) + d("ok") + h(f("x-t", "EXCESS") + cl("3"), end: true), true),
    ]

    @Test(arguments: malformedResponses)
    func malformedResponsesAreStreamErrors(_ label: String, _ method: String, _ frames: [UInt8], _ headFirst: Bool) {
        let (recorder, reset) = Self.respond(method, frames)
        #expect(reset == RawFrame.uint32(H2ErrorCode.protocolError.rawValue), "\(label)")
        #expect(recorder.failed[1] == .malformed, "\(label)")
        #expect(recorder.completed.isEmpty, "\(label)")
        #expect(recorder.trailers[1] == nil, "\(label)")
        #expect((recorder.heads[1] != nil) == headFirst, "\(label)")
        #expect(!String(decoding: recorder.bodies[1] ?? [], as: UTF8.self).contains("EXCESS"), "\(label)")
        #expect(recorder.heads[1].map { Self.fields($0.headers) }?.contains { $0.hasPrefix("x:") } != true, "\(label)")
    }

    /// At the edge of the rules, and delivered: a 204's `content-length: 0` (dropped, as nghttp2 dropped it), `content-length`
    /// without DATA in a response to HEAD and in a 304, interim heads before the final one, `te: trailers`, HTAB and
    /// obs-text inside a value, trailers whose `content-length` matches a body that had none.
    static let goodResponses: [(String, String, [UInt8], [String])] = [
        ("204 with content-length 0", "GET", h(noContent + cl("0") + f("x", "1"), end: true), ["x: 1"]),
        ("HEAD with content-length", "HEAD", h(ok + cl("10"), end: true), ["content-length: 10"]),
        ("HEAD with content-length and an empty DATA", "HEAD", h(ok + cl("10")) + d("", end: true), ["content-length: 10"]),
        ("304 with content-length", "GET", h(status("304") + cl("10"), end: true), ["content-length: 10"]),
        ("interim heads then the final one", "GET",
         h(status("100")) + h(status("103") + f("link", "</a>")) + h(ok + cl("2")) + d("o") + d("k", end: true),
         ["content-length: 2"]),
        ("te: trailers, HTAB and obs-text", "GET", h(ok + f("te", "trailers") + f("x", "a\tb \u{80}")) + d("ok", end: true),
         ["te: trailers", "x: a\tb \u{80}"]),
        ("trailers with content-length", "GET", h(ok) + d("ok") + h(f("x-t", "1") + cl("2"), end: true), []),
    ]

    @Test(arguments: goodResponses)
    func goodResponsesAtTheEdgeAreDelivered(_ label: String, _ method: String, _ frames: [UInt8], _ expected: [String]) {
        let (recorder, reset) = Self.respond(method, frames)
        #expect(reset == nil, "\(label)")
        #expect(recorder.failed.isEmpty, "\(label)")
        #expect(recorder.completed == [1], "\(label)")
        let fields = recorder.heads[1].map { Self.fields($0.headers) } ?? []
        for field in expected { #expect(fields.contains(field), "\(label): \(fields)") }
        #expect(label != "204 with content-length 0" || !fields.contains { $0.hasPrefix("content-length") }, "\(label)")
    }

    /// A head submitted from records (`H2RequestFields`) goes to nghttp2 without copies: the session holds the records
    /// until the HEADERS frame is sent (the server reads it whole), given up (the stream reset before it went out), or
    /// the session is closed.
    @Test func requestRecordsAreHeldUntilTheirHeadersGoOut() {
        func record(_ name: String, _ value: String) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: H2RequestFields.Record.headerSize)
            out.withUnsafeMutableBytes {
                H2RequestFields.Record.writeHeader(at: $0.baseAddress!, nameCount: name.utf8.count,
                                                   valueCount: value.utf8.count, flags: 0)
            }
            return out + Array(name.utf8) + Array(value.utf8)
        }
        var layout = H2RequestFields.Layout()
        var bytes = record("", "GET")
        layout.pathRecord = bytes.count
        bytes += record("", "/p")
        layout.authorityRecord = bytes.count
        bytes += record("", "up.example")
        bytes += record("x-a", " one ") + record("x-token", String(repeating: "t", count: 900))
        layout.records = 5
        let head = bytes.withUnsafeBytes { H2RequestFields(records: $0, layout: layout) }
        let server = H2Recorder()
        let serverSession = H2ServerSession(delegate: server)
        let client = H2ClientSession(delegate: H2ClientRecorder())
        #expect(client.submitRequest(head, scheme: "http", defaultAuthority: "d") == 1)
        #expect(client.heldHeads.count == 1)
        Self.pump(client, serverSession)
        #expect(client.heldHeads.isEmpty)
        let fields = server.heads[1].map { Self.fields($0.headers) } ?? []
        #expect(server.heads[1]?.target == "/p")
        #expect(fields.contains("x-a: one"))
        #expect(fields.contains("x-token: " + String(repeating: "t", count: 900)))
        #expect(fields.contains("host: up.example"))
        let reset = client.submitRequest(head, scheme: "http", defaultAuthority: "d")
        #expect(reset == 3)
        client.resetStream(streamID: 3)
        client.send { _ in }
        #expect(client.heldHeads.isEmpty, "given up: the stream was reset before its HEADERS went out")
        #expect(client.submitRequest(head, scheme: "http", defaultAuthority: "d") == 5)
        client.close()
        #expect(client.heldHeads.isEmpty)
    }
}
