import EventLoop
import HTTPWire

/// `RequestHeadSink` writing HTTP/1.1 text: `METHOD target HTTP/1.1`, then `Name: value` lines, then the empty line.
/// Each value is scanned for CR, LF and NUL once written.
struct HTTP1HeadSink: RequestHeadSink {
    private(set) var safe = true
    /// Start of the value being written.
    private var mark = 0

    init(_ out: IOBuffer) {
        mark = out.writerIndex
    }

    @inline(__always)
    private mutating func check(_ out: IOBuffer) {
        if safe && RequestHeadWriter.hasLineBreakOrNUL(out, from: mark) { safe = false }
    }

    @inline(__always)
    mutating func requestLine(method: String, basePath: String, path: String, query: Substring?, _ out: IOBuffer) {
        mark = out.writerIndex
        out.append(method)
        out.append(byte: UInt8(ascii: " "))
        if !basePath.isEmpty { out.append(basePath) }
        out.append(path)
        if let q = query {
            out.append(byte: UInt8(ascii: "?"))
            out.append(q)
        }
        check(out)
        out.append(static: " HTTP/1.1\r\n")
    }

    @inline(__always)
    mutating func field(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ out: IOBuffer) {
        out.append(name)
        out.append(static: ": ")
        mark = out.writerIndex
        out.append(value)
        check(out)
        out.append(static: "\r\n")
    }

    @inline(__always)
    mutating func beginField(_ field: UpstreamHeadField, _ out: IOBuffer) {
        out.append(static: field.http1Prefix)
        mark = out.writerIndex
    }

    @inline(__always)
    mutating func endField(checked: Bool, _ out: IOBuffer) {
        if !checked { check(out) }
    }

    @inline(__always)
    mutating func constantField(_ field: UpstreamHeadField, _ out: IOBuffer) {
        out.append(static: field.http1Prefix)
    }

    @inline(__always)
    mutating func finish(framing: RequestBodyFraming, _ out: IOBuffer) {
        out.append(static: "\r\n\r\n")
    }
}
