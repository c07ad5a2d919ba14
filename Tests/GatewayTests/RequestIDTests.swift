import EventLoop
@testable import Gateway
@testable import ProxyCore
import Testing

/// A request id's bytes handed out in place (`withBytes`, the HTTP/2 response head) are its text (`string`, the logs).
struct RequestIDTests {
    @Test func bytesInPlaceAreTheText() {
        var generator = RequestIdGenerator()
        var ids = [RequestID(bits: (0, 0)), RequestID(bits: (.max, .max)), RequestID(bits: (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)),
                   RequestID(client: "client-given-id"), RequestID(client: "")]
        for _ in 0..<100 { ids.append(RequestID(bits: generator.nextBits())) }
        for id in ids {
            #expect(id.withBytes { String(decoding: $0, as: UTF8.self) } == id.string)
        }
        #expect(ids[2].string == "0123456789abcdeffedcba9876543210")
        #expect(ids[1].string == String(repeating: "f", count: 32))
        #expect(ids[0].string == String(repeating: "0", count: 32))
        // The digits against the standard library's formatting, in place (`append(to:)`) and as text.
        var bitsList: [(UInt64, UInt64)] = [(0, 0), (.max, .max), (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210),
                                            (0xA0B1_C2D3_E4F5_0617, 0x0000_0000_0000_000A)]
        for _ in 0..<100 { bitsList.append(generator.nextBits()) }
        for (a, b) in bitsList {
            let id = RequestID(bits: (a, b))
            let expected = [a, b].map { word in
                let hex = String(word, radix: 16)
                return String(repeating: "0", count: 16 - hex.count) + hex
            }.joined()
            #expect(id.string == expected)
            let out = IOBuffer(capacity: 0)
            id.append(to: out)
            #expect(String(decoding: out.readable, as: UTF8.self) == expected)
        }
        #expect(ids[0].withBytes { $0.count } == 32)
    }
}
