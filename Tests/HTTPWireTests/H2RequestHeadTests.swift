import CNghttp2
import Testing
@testable import HTTPWire

/// The pseudo-fields of each header block go through one buffer the session reuses from block to block, and response
/// heads are handed to nghttp2 from the stack: heads and responses of many streams stay each their own.
@Suite("HTTP/2 request heads and response lists")
struct H2RequestHeadTests {
    @Test func headsOfManyStreamsInOneReadKeepTheirOwnPseudoFields() throws {
        let recorder = H2Recorder()
        let server = H2ServerSession(delegate: recorder)
        let client = H2TestClient()
        let long = "/" + String(repeating: "l", count: 6000)
        let requests: [(method: String, path: String, authority: String?, host: String?)] = [
            ("GET", "/a", "one.example", nil), ("POST", long, "two.example:8443", nil), ("DELETE", "/c?x=1", nil, "three"),
            ("OPTIONS", "*", "Four.Example", "four.example"), ("get", "/lower", "five", nil), ("PROPFIND", "/dav", "six", nil),
            ("PATCH", "/", "seven", nil),
        ]
        var ids: [Int32] = []
        for r in requests {
            var fields = [(":method", r.method), (":scheme", "https")]
            if let authority = r.authority { fields.append((":authority", authority)) }
            fields.append((":path", r.path))
            if let host = r.host { fields.append(("host", host)) }
            fields.append(("x-n", String(ids.count)))
            ids.append(client.request(fields))
        }
        // One after the other as well: a head delivered earlier is unchanged by the blocks read after it.
        pump(client, server)
        let later = client.request([(":method", "PUT"), (":scheme", "http"), (":authority", "later"), (":path", "/z")])
        pump(client, server)
        for (i, (id, r)) in zip(ids, requests).enumerated() {
            let head = try #require(recorder.heads[id])
            #expect(head.method == r.method)
            #expect(head.target == r.path)
            #expect(head.host == (r.authority ?? r.host))
            #expect(head.headers.firstValue(forLowercased: "x-n") == String(i))
            #expect(head.headers.firstValue(forLowercased: "host") == (r.host ?? r.authority))
        }
        #expect(recorder.heads[later]?.method == "PUT")
        #expect(recorder.heads[later]?.target == "/z")
        #expect(recorder.heads[later]?.host == "later")
        #expect(client.goAway == nil)
    }

    @Test func refusedStreamsBetweenGoodOnesLeaveThemIntact() throws {
        let recorder = H2Recorder()
        let server = H2ServerSession(delegate: recorder)
        let client = H2TestClient()
        let first = client.request([(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "/1")])
        let connect = client.request([(":method", "CONNECT"), (":authority", "example.com:443")])
        let noPath = client.request([(":method", "GET"), (":scheme", "https"), (":authority", "b")])
        let last = client.request([(":method", "HEAD"), (":scheme", "https"), (":authority", "c"), (":path", "/3")])
        pump(client, server)
        #expect(recorder.heads[first]?.target == "/1")
        #expect(recorder.heads[first]?.host == "a")
        #expect(recorder.heads[last]?.method == "HEAD")
        #expect(recorder.heads[last]?.target == "/3")
        #expect(recorder.heads[last]?.host == "c")
        #expect(recorder.heads[connect] == nil && recorder.heads[noPath] == nil)
        #expect(client.responses[connect]?.closeCode == H2ErrorCode.refusedStream.rawValue)
        #expect(client.responses[noPath]?.closeCode == H2ErrorCode.protocolError.rawValue)
    }

    @Test func decimalValuesAreWrittenExactly() {
        var list = H2HeaderList()
        let numbers: [Int64] = [0, 7, 10, 1_234_567_890_123, Int64.max, -5, Int64.min]
        for n in numbers { list.add("content-length", decimal: n) }
        let values = list.withNV(status: 200) { nva in
            nva.dropFirst().map { String(decoding: UnsafeBufferPointer(start: $0.value, count: $0.valuelen), as: UTF8.self) }
        }
        #expect(values == numbers.map { String($0) })
    }

    @Test func longListsAreHandedOverWhole() {
        var list = H2HeaderList()
        for i in 0..<300 { list.add("X-Field-\(i)", "v\(i)") }
        list.add("connection", "x-field-7")
        let fields = list.withNV(status: 204) { nva in
            nva.map {
                (String(decoding: UnsafeBufferPointer(start: $0.name, count: $0.namelen), as: UTF8.self),
                 String(decoding: UnsafeBufferPointer(start: $0.value, count: $0.valuelen), as: UTF8.self))
            }
        }
        #expect(fields.count == 300)
        #expect(fields.first?.0 == ":status" && fields.first?.1 == "204")
        #expect(fields.dropFirst().map(\.0) == (0..<300).filter { $0 != 7 }.map { "x-field-\($0)" })
        #expect(fields.dropFirst().map(\.1) == (0..<300).filter { $0 != 7 }.map { "v\($0)" })
    }

    @Test func aReusedListStartsEmpty() {
        var list = H2HeaderList(capacity: 64)
        list.add("Connection", "x-gone")
        list.add("X-Gone", "1")
        list.add("X-Kept", "2")
        func names(_ list: H2HeaderList) -> [String] {
            list.withNV(status: 200) { nva in
                nva.map { String(decoding: UnsafeBufferPointer(start: $0.name, count: $0.namelen), as: UTF8.self) }
            }
        }
        #expect(names(list) == [":status", "x-kept"])
        for limit in [0, 8192] {
            list.removeAll(keepingUpTo: limit)
            list.reserve(32)
            #expect(names(list) == [":status"])
            list.add("X-Gone", "3")
            list.add("content-length", decimal: 12)
            #expect(names(list) == [":status", "x-gone", "content-length"])
        }
    }

    /// A request id goes out as a literal never indexed (RFC 7541 §6.2.3): the same field for the client, no entry in
    /// the connection's HPACK table per response.
    @Test func neverIndexedFieldsArriveUnchanged() throws {
        var list = H2HeaderList()
        list.add("x-a", "1")
        Array("0123456789abcdef".utf8).withUnsafeBytes { list.addNeverIndexed("X-Request-Id", $0) }
        let flags = list.withNV(status: 200) { nva in nva.map(\.flags) }
        #expect(flags == [0, 0, UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)])

        let recorder = H2Recorder()
        var n = 0
        recorder.onRequest = { session, id, _, _ in
            n += 1
            var list = H2HeaderList()
            list.add("x-a", "1")
            Array("id-\(n)".utf8).withUnsafeBytes { list.addNeverIndexed("x-request-id", $0) }
            session.sendResponseHead(streamID: id, status: 200, list: list, endStream: true)
        }
        let server = H2ServerSession(delegate: recorder)
        let client = H2TestClient()
        var ids: [Int32] = []
        for _ in 0..<3 {
            ids.append(client.request([(":method", "GET"), (":scheme", "https"), (":authority", "a"), (":path", "/")]))
            pump(client, server)
        }
        for (i, id) in ids.enumerated() {
            let response = try #require(client.responses[id])
            #expect(response.status == 200)
            #expect(response.headers.map(\.0) == ["x-a", "x-request-id"])
            #expect(response.headers.last?.1 == "id-\(i + 1)")
        }
    }
}
