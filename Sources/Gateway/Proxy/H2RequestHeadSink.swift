import EventLoop
import HTTPWire

/// `RequestHeadSink` writing HTTP/2 field records (`H2RequestFields.Record`) for an `h2` upstream: what
/// `H2ClientRequestHead` made of the HTTP/1.1 text, made directly. The request line becomes the `:method` and `:path`
/// records, `Host` the `:authority` one, client names are lower-cased as they are copied, `Transfer-Encoding` is left
/// out (DATA frames frame the body), `x-request-id` is flagged never indexed, and a value with a control byte other
/// than HTAB is flagged left out (CR, LF or NUL make the head unsafe, as in the text). It also counts the size the text
/// would have had, so the upstream parser limits the text's parse applied still apply (`draft`).
struct H2RequestHeadSink: RequestHeadSink {
    /// What the upstream stream needs besides the records: where the pseudo fields are, and whether the head is within
    /// the limits (a head that is not is refused as the text's parse refused it: the stream fails `bad_response`).
    struct Draft: Equatable {
        var layout: H2RequestFields.Layout
        var fits: Bool
    }

    typealias Record = H2RequestFields.Record

    private(set) var safe = true
    private var layout = H2RequestFields.Layout()
    /// The text's size: all its bytes, its request line without CRLF, its field lines.
    private var http1Bytes = 0
    private var requestLineBytes = 0
    private var http1Lines = 0
    /// A method and a target (the text's parse refused a request line without either).
    private var wellFormed = true
    /// The record being written: its start, its name's length, its flags, whether it is a pseudo field's (no name,
    /// not checked as a field value: the text's parse did not check those either).
    private var record = 0
    private var nameCount = 0
    private var flags: UInt32 = 0
    private var pseudo = false

    init() {}

    /// Where the records stand and whether they are within `limits` (`H2ClientRequestHead`'s: the text's size against
    /// `maxHeadBytes`, its request line against `maxRequestLineBytes`, its field lines against `maxHeaders`).
    func draft(limits: HTTPParserLimits) -> Draft {
        Draft(layout: layout, fits: wellFormed && http1Bytes <= limits.maxHeadBytes
                  && requestLineBytes <= limits.maxRequestLineBytes && http1Lines <= limits.maxHeaders)
    }

    /// Opens a record: its header is written when it is closed; the name is copied lower-cased.
    @inline(__always)
    private mutating func open(_ name: UnsafeRawBufferPointer, flags: UInt32, pseudo: Bool, _ out: IOBuffer) {
        record = out.writerIndex
        let count = name.count
        out.reserve(Record.headerSize + count)
        out.didWrite(Record.headerSize)
        if count > 0, let src = name.baseAddress {
            let dst = out.base + out.writerIndex
            var i = 0
            while i + 8 <= count {
                let word = HTTPSyntax.lowercased(word: src.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                dst.storeBytes(of: word, toByteOffset: i, as: UInt64.self)
                i += 8
            }
            while i < count {
                dst.storeBytes(of: HTTPSyntax.lowercased(src.load(fromByteOffset: i, as: UInt8.self)), toByteOffset: i,
                               as: UInt8.self)
                i += 1
            }
            out.didWrite(count)
        }
        nameCount = count
        self.flags = flags
        self.pseudo = pseudo
    }

    /// Closes the record opened last; returns its value's length.
    @inline(__always) @discardableResult
    private mutating func close(_ out: IOBuffer) -> Int {
        let valueStart = record + Record.headerSize + nameCount
        let valueCount = out.writerIndex - valueStart
        var f = flags
        if pseudo {
            if safe && RequestHeadWriter.hasLineBreakOrNUL(out, from: valueStart) { safe = false }
        } else if !HTTPSyntax.isFieldValue(UnsafeRawBufferPointer(start: out.base + valueStart, count: valueCount)) {
            if RequestHeadWriter.hasLineBreakOrNUL(out, from: valueStart) { safe = false }
            f |= Record.leftOut
        }
        Record.writeHeader(at: out.base + record, nameCount: nameCount, valueCount: valueCount, flags: f)
        layout.records += 1
        return valueCount
    }

    /// A pseudo field's record has no name.
    private static var noName: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: nil, count: 0) }

    @inline(__always)
    mutating func requestLine(method: String, basePath: String, path: String, query: Substring?, _ out: IOBuffer) {
        open(Self.noName, flags: 0, pseudo: true, out)
        out.append(method)
        let methodCount = close(out)
        layout.pathRecord = out.writerIndex
        open(Self.noName, flags: 0, pseudo: true, out)
        if !basePath.isEmpty { out.append(basePath) }
        out.append(path)
        if let q = query {
            out.append(byte: UInt8(ascii: "?"))
            out.append(q)
        }
        let targetCount = close(out)
        wellFormed = methodCount > 0 && targetCount > 0
        // `METHOD SP target SP HTTP/1.1`, then CRLF.
        requestLineBytes = methodCount + 1 + targetCount + 9
        http1Bytes += requestLineBytes + 2
    }

    @inline(__always)
    mutating func field(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ out: IOBuffer) {
        open(name, flags: 0, pseudo: false, out)
        out.append(value)
        countLine(name.count, close(out))
    }

    @inline(__always)
    mutating func beginField(_ field: UpstreamHeadField, _ out: IOBuffer) {
        let name = field.h2Name
        let bytes = UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        switch field {
        case .host:
            layout.authorityRecord = out.writerIndex
            open(Self.noName, flags: 0, pseudo: true, out)
            // The name's length, for the text's line: `Host`.
            nameCount = 0
        case .requestId:
            open(bytes, flags: Record.neverIndexed, pseudo: false, out)
        default:
            open(bytes, flags: 0, pseudo: false, out)
        }
    }

    @inline(__always)
    mutating func endField(checked: Bool, _ out: IOBuffer) {
        // Every value is checked here, even one the text writer need not scan: a field value must also be free of the
        // other control bytes (the authority's copy in `x-forwarded-host` is, as in the text's parse).
        let wasAuthority = pseudo
        let valueCount = close(out)
        countLine(wasAuthority ? 4 : nameCount, valueCount)
    }

    @inline(__always)
    mutating func constantField(_ field: UpstreamHeadField, _ out: IOBuffer) {
        switch field {
        case .teTrailers:
            let name = field.h2Name
            open(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), flags: 0, pseudo: false, out)
            out.append(static: "trailers")
            countLine(2, close(out))
        default:
            // `Transfer-Encoding: chunked`: a line of the text, no HTTP/2 field.
            countLine(17, 7)
        }
    }

    @inline(__always)
    mutating func finish(framing: RequestBodyFraming, _ out: IOBuffer) {
        http1Bytes += 2
        switch framing {
        case .none: layout.endStream = true
        case .contentLength(let n): layout.endStream = n == 0
        case .chunked: layout.endStream = false
        }
    }

    /// One line `Name: value` CRLF of the text.
    @inline(__always)
    private mutating func countLine(_ nameCount: Int, _ valueCount: Int) {
        http1Bytes += nameCount + valueCount + 4
        http1Lines += 1
    }
}
