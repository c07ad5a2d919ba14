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
}
