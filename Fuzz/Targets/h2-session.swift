// libFuzzer target: the HTTP/2 server session the gateway runs each h2/h2c connection through (HTTPWire.H2ServerSession
// over nghttp2): the client preface, then the input as frames, fed in two reads; every complete request is answered
// (a head and a 100-byte body) and every body byte consumed, as the proxy does. Never crashes or leaks; the events
// keep the documented order (data only between a stream's head and its end, exactly one close or reset per stream the
// delegate heard of, nothing after it); the bytes the session holds for responses stay bounded by what was answered,
// and its output by a constant per input byte.
import HTTPWire

let body = [UInt8](repeating: 0x61, count: 100)

final class Recorder: H2SessionDelegate {
    var open: Set<Int32> = []
    var ended: Set<Int32> = []
    var finished: Set<Int32> = []
    var answered = 0

    func heard(_ id: Int32) {
        precondition(!open.contains(id) && !finished.contains(id), "stream \(id) reported twice")
        open.insert(id)
    }

    func respond(_ session: H2ServerSession, _ id: Int32) {
        answered += 1
        if session.sendResponseHead(streamID: id, status: 200, headers: [("content-type", "text/plain")], endStream: false) {
            _ = session.sendData(streamID: id, body, endStream: true)
        }
    }

    func h2(_ session: H2ServerSession, didReceiveRequest streamID: Int32, head: HTTPRequestHead, endStream: Bool) {
        heard(streamID)
        if endStream {
            ended.insert(streamID)
            respond(session, streamID)
        }
    }

    func h2(_ session: H2ServerSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        precondition(open.contains(streamID) && !ended.contains(streamID), "data outside stream \(streamID)'s body")
        session.consume(streamID: streamID, bytes: bytes.count)
    }

    func h2(_ session: H2ServerSession, didEndStream streamID: Int32) {
        precondition(open.contains(streamID) && ended.insert(streamID).inserted, "end of stream \(streamID) out of order")
        respond(session, streamID)
    }

    func h2(_ session: H2ServerSession, didResetStream streamID: Int32, errorCode: H2ErrorCode) { finish(streamID) }

    func h2(_ session: H2ServerSession, didCloseStream streamID: Int32) { finish(streamID) }

    func finish(_ id: Int32) {
        precondition(open.remove(id) != nil, "stream \(id) closed twice or never opened")
        finished.insert(id)
    }

    func h2(_ session: H2ServerSession, streamExceededHeaderLimit streamID: Int32) {
        heard(streamID)
        answered += 1
        _ = session.sendResponseHead(streamID: streamID, status: 431, headers: [], endStream: true)
    }

    func h2(_ session: H2ServerSession, didDrainOutput streamID: Int32) {
        precondition(open.contains(streamID), "drain of stream \(streamID), which is not open")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let recorder = Recorder()
    let session = H2ServerSession(delegate: recorder)
    var input = H2ServerSession.clientPreface
    input.append(contentsOf: UnsafeBufferPointer(start: data, count: size))
    let split = H2ServerSession.clientPreface.count + (size == 0 ? 0 : Int(data[0]) % (size + 1))
    var output = 0
    var closed = false
    input.withUnsafeBytes { all in
        for chunk in [all[..<split], all[split...]] where !closed {
            if case .closeConnection = session.receive(UnsafeRawBufferPointer(rebasing: chunk)) { closed = true }
            output += session.send { _ in }
            precondition(session.totalBufferedBytes <= recorder.answered * body.count, "response bytes beyond what was answered")
        }
    }
    // Our SETTINGS and window update, plus for each input byte at most an acknowledgement or a small response.
    precondition(output <= 4096 + 64 * size, "\(output) bytes out for \(size) in")
    return 0
}
