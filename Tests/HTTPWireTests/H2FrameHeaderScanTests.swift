import Testing
@testable import HTTPWire

/// `H2FrameHeaderScan` (issue 39, CVE-2019-9518): it finds exactly the DATA frames without data and without
/// END_STREAM, steps over the preface and every payload, and gives the same count fed whole or byte by byte.
@Suite struct H2FrameHeaderScanTests {
    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt8 = 1, _ payload: [UInt8] = []) -> [UInt8] {
        let n = payload.count
        return [UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF), type, flags, 0, 0, 0, stream] + payload
    }

    static let input: [UInt8] = {
        var bytes = H2ServerSession.clientPreface + frame(4)
        bytes += frame(1, flags: 0x4, [0x83, 0x86, 0x84])             // HEADERS
        bytes += frame(0)                                               // empty DATA: counted
        bytes += frame(0, [UInt8](repeating: 0, count: 9))              // a payload that looks like an empty DATA header
        bytes += frame(0, flags: 0x8, [0])                              // padded, no data: counted
        bytes += frame(0, flags: 0x8, [1, 0])                           // padding only, but longer: not seen (the scan reads no payload)
        bytes += frame(0, flags: 0x1)                                   // empty DATA with END_STREAM: fine
        bytes += frame(0, [UInt8](repeating: 0x41, count: 70_000))      // a long payload stepped over
        bytes += frame(0, stream: 9)                                    // empty DATA on another (closed) stream: counted
        bytes += frame(8, [0, 0, 0, 0])                                 // WINDOW_UPDATE, length 4
        return bytes
    }()

    @Test func countsEmptyDataFramesWholeAndByteByByte() {
        var whole = H2FrameHeaderScan()
        let all = Self.input.withUnsafeBytes { whole.scan($0) }
        #expect(all == 3)
        var split = H2FrameHeaderScan()
        var one = 0
        for byte in Self.input { one += [byte].withUnsafeBytes { split.scan($0) } }
        #expect(one == 3)
    }
}
