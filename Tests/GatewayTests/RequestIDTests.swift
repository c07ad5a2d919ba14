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
        #expect(ids[0].withBytes { $0.count } == 32)
    }
}
