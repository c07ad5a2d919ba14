// libFuzzer target: the HTTP/2 client session the gateway speaks to `protocol: h2` upstreams through
// (HTTPWire.H2ClientSession over nghttp2): three requests are opened (a HEAD, one with a body, one with a body and
// trailers), a fourth from records between the two reads (its bytes not copied by nghttp2), then the input is fed as the server's bytes in two reads, every response body byte consumed. A hostile
// upstream must never crash it or make it leak; the events keep the documented order (a head before data and trailers,
// nothing after a stream's one completion or failure); no body byte goes past the head's `content-length` (or past none
// for a response without content: to HEAD, a 204, a 304), and a completed response has exactly that many; the request
// bytes it holds stay bounded by what was queued, and its output by a constant per input byte.
import HTTPWire

let body = [UInt8](repeating: 0x62, count: 1000)

/// A head as the gateway's writer gives it (`H2RequestFields` records: `GET /r`, `:authority`, a token-sized field),
/// submitted between the two reads: nghttp2 reads its bytes without copies, so the session must hold them until the
/// HEADERS frame is sent or given up (AddressSanitizer sees any read after that).
let recordsHead: H2RequestFields = {
    func record(_ name: String, _ value: String) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: H2RequestFields.Record.headerSize)
        out.withUnsafeMutableBytes { raw in
            if let at = raw.baseAddress {
                H2RequestFields.Record.writeHeader(at: at, nameCount: name.utf8.count, valueCount: value.utf8.count, flags: 0)
            }
        }
        return out + Array(name.utf8) + Array(value.utf8)
    }
    var layout = H2RequestFields.Layout()
    var bytes = record("", "GET")
    layout.pathRecord = bytes.count
    bytes += record("", "/r")
    layout.authorityRecord = bytes.count
    bytes += record("", "a")
    bytes += record("x-firebase-appcheck", String(repeating: "t", count: 800))
    layout.records = 4
    return bytes.withUnsafeBytes { H2RequestFields(records: $0, layout: layout) }
}()

final class Recorder: H2ClientSessionDelegate {
    var headed: Set<Int32> = []
    var ended: Set<Int32> = []
    /// Per stream: the body length its head allows (nil: any), and the body bytes delivered.
    var allowed: [Int32: Int] = [:]
    var delivered: [Int32: Int] = [:]
    var headStream: Int32 = -1

    func live(_ id: Int32) {
        precondition(!ended.contains(id), "event for stream \(id) after its end")
    }

    func h2(_ session: H2ClientSession, didReceiveResponse streamID: Int32, status: Int, headers: HTTPHeaders,
            endStream: Bool) {
        live(streamID)
        precondition(headed.insert(streamID).inserted, "two final heads on stream \(streamID)")
        precondition((200...999).contains(status), "status \(status)")
        if streamID == headStream || status == 204 || status == 304 {
            allowed[streamID] = 0
        } else if let i = headers.firstIndex(ofLiteral: "content-length") {
            let n = headers.withValueBytes(at: i) { v in v.reduce(0) { $0 &* 10 &+ Int($1 &- 0x30) } }
            precondition(headers.firstIndex(ofLiteral: "content-length", after: i) == nil, "two content-lengths")
            allowed[streamID] = n
        }
        precondition(!endStream || (allowed[streamID] ?? 0) == 0, "a head ending the stream with a content-length")
    }

    func h2(_ session: H2ClientSession, didReceiveData streamID: Int32, _ bytes: UnsafeRawBufferPointer) {
        live(streamID)
        precondition(headed.contains(streamID), "data before the head on stream \(streamID)")
        delivered[streamID, default: 0] += bytes.count
        if let limit = allowed[streamID] {
            precondition(delivered[streamID, default: 0] <= limit, "body past content-length on stream \(streamID)")
        }
        session.consume(streamID: streamID, bytes: bytes.count)
    }

    func h2(_ session: H2ClientSession, didReceiveTrailers streamID: Int32, _ trailers: HTTPHeaders) {
        live(streamID)
        precondition(headed.contains(streamID), "trailers before the head on stream \(streamID)")
    }

    func h2(_ session: H2ClientSession, didCompleteStream streamID: Int32) {
        live(streamID)
        precondition(headed.contains(streamID), "stream \(streamID) complete without a head")
        if let limit = allowed[streamID] {
            precondition(delivered[streamID, default: 0] == limit, "body short of content-length on stream \(streamID)")
        }
        ended.insert(streamID)
    }

    func h2(_ session: H2ClientSession, didFailStream streamID: Int32, _ failure: H2StreamFailure) {
        live(streamID)
        ended.insert(streamID)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let recorder = Recorder()
    let session = H2ClientSession(delegate: recorder)
    var list = H2HeaderList()
    list.add("accept", "*/*")
    list.addTETrailers()
    var ids: [Int32] = []
    if let id = session.submitRequest(method: "HEAD", scheme: "http", authority: "a", path: "/", headers: list,
                                      endStream: true) {
        ids.append(id)
        recorder.headStream = id
    }
    if let id = session.submitRequest(method: "POST", scheme: "http", authority: "a", path: "/b", headers: list,
                                      endStream: false) {
        ids.append(id)
        body.withUnsafeBytes { _ = session.sendData(streamID: id, $0, endStream: true) }
    }
    if let id = session.submitRequest(method: "POST", scheme: "http", authority: "a", path: "/t", headers: list,
                                      endStream: false) {
        ids.append(id)
        body.withUnsafeBytes { _ = session.sendData(streamID: id, $0, endStream: false) }
        var trailers = H2HeaderList()
        trailers.add("x-checksum", "1")
        _ = session.sendTrailers(streamID: id, trailers)
    }
    precondition(ids.count == 3, "a new session takes three streams")
    var output = session.send { _ in }
    let split = size == 0 ? 0 : Int(data[0]) % (size + 1)
    var closed = false
    UnsafeRawBufferPointer(start: data, count: size).withMemoryRebound(to: UInt8.self) { all in
        let raw = UnsafeRawBufferPointer(all)
        for (n, chunk) in [raw[..<split], raw[split...]].enumerated() where !closed {
            if n == 1, let id = session.submitRequest(recordsHead, scheme: "http", defaultAuthority: "d") { ids.append(id) }
            if case .closeConnection = session.receive(UnsafeRawBufferPointer(rebasing: chunk)) { closed = true }
            output += session.send { _ in }
            precondition(session.totalBufferedBytes <= 2 * body.count, "request bytes beyond what was queued")
        }
    }
    session.close()
    precondition(Set(ids).isSubset(of: recorder.ended), "a stream never ended: \(ids) vs \(recorder.ended)")
    // The preface, SETTINGS, window update, three requests and their bodies, plus per input byte at most an
    // acknowledgement or a reset.
    precondition(output <= 8192 + 64 * size, "\(output) bytes out for \(size) in")
    return 0
}
