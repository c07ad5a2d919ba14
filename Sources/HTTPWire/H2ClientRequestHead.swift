import CNghttp2
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 request head the gateway wrote itself (the gateway's `RequestHeadWriter`), as the HTTP/2 request an
/// upstream stream opens with (RFC 9113 §8.3.1): the request line's method and target become `:method` and `:path`,
/// the first `Host` becomes `:authority`, names are lower-cased, and the connection-specific fields are left out
/// (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`; `te` is kept only as
/// `te: trailers`). `H2ClientSession.submitRequest(_:scheme:defaultAuthority:)` sends it.
///
/// One copy of the bytes (names lower-cased in it), which the stream keeps for a resubmission after REFUSED_STREAM;
/// the `nghttp2_nv` array is made on the stack when submitting, pointing into it. Before, the head went through the
/// full request parser, an `H2HeaderList` (a second copy, every name and value checked again) and a third array with
/// the pseudo fields: about 28,000 instructions per request of the ~46,000 its submission cost.
///
/// It trusts the syntax the writer guarantees (names checked as tokens when the client's head was parsed, values free
/// of CR, LF and NUL) and checks what it still must: the shape of every line (a head that is not one is refused, nil),
/// the upstream parser limits the full parse applied (`maxHeadBytes`, `maxHeaders`, `maxRequestLineBytes`; over one,
/// nil), and each value with `HTTPSyntax.isFieldValue` (a value with another control byte, from a claim say, is left
/// out, as `H2HeaderList` leaves it out). The body's framing decides `endStream`: no `Content-Length` and no
/// `Transfer-Encoding`, or `Content-Length: 0`, is a request without a body.
public struct H2ClientRequestHead {
    /// The head's bytes, names lower-cased.
    public private(set) var bytes: [UInt8]
    /// The request method (the request line's first word).
    public let method: String
    /// No body follows: HEADERS carries END_STREAM.
    public let endStream: Bool
    private let methodEnd: Int
    private let pathStart: Int
    private let pathEnd: Int
    /// The first `Host` value's range, if any.
    private let authority: Range<Int>?
    /// Where the field lines start (after the request line's CRLF) and end (before the empty line).
    private let fieldsStart: Int
    private let fieldsEnd: Int
    /// Field lines (an upper bound of the fields sent, pseudo fields not counted).
    private let fieldCount: Int

    /// Lower-cases the names of `raw` (a copy) and records what the submission needs; nil when `raw` is not one
    /// request head with CRLF line ends, or is over `limits`.
    public init?(_ raw: UnsafeRawBufferPointer, limits: HTTPParserLimits) {
        guard raw.count <= limits.maxHeadBytes else { return nil }
        var bytes = [UInt8](raw)
        var parsed: (method: String, methodEnd: Int, pathStart: Int, pathEnd: Int, authority: Range<Int>?,
                     fieldsStart: Int, fieldsEnd: Int, count: Int, endStream: Bool)?
        bytes.withUnsafeMutableBytes { mb in
            let b = UnsafeRawBufferPointer(mb)
            let count = b.count
            // Request line: METHOD SP TARGET SP HTTP/1.1 CRLF.
            guard let lineEnd = Self.lineEnd(b, from: 0), lineEnd <= limits.maxRequestLineBytes,
                  let sp1 = Self.index(of: UInt8(ascii: " "), in: b, 0, lineEnd), sp1 > 0 else { return }
            var sp2 = lineEnd
            while sp2 > sp1 + 1, b[sp2 - 1] != UInt8(ascii: " ") { sp2 -= 1 }
            guard sp2 > sp1 + 2 else { return }
            let method = String(decoding: UnsafeRawBufferPointer(rebasing: b[0..<sp1]), as: UTF8.self)
            var authority: Range<Int>?
            var fields = 0
            var contentLengthZero: Bool?
            var chunked = false
            var i = lineEnd + 2
            let fieldsStart = i
            while true {
                guard let end = Self.lineEnd(b, from: i) else { return }
                if end == i { break }  // the empty line
                guard let colon = Self.index(of: UInt8(ascii: ":"), in: b, i, end), colon > i else { return }
                for k in i..<colon { mb[k] = HTTPSyntax.lowercased(mb[k]) }
                // Every field line counts against `maxHeaders`, as in the parser.
                fields += 1
                switch Self.kind(UnsafeRawBufferPointer(rebasing: b[i..<colon])) {
                case .host:
                    if authority == nil {
                        let (vs, ve) = HTTPSyntax.trimOWS(b, colon + 1, end)
                        authority = vs..<ve
                    }
                case .contentLength:
                    let (vs, ve) = HTTPSyntax.trimOWS(b, colon + 1, end)
                    contentLengthZero = ve - vs == 1 && b[vs] == UInt8(ascii: "0")
                case .transferEncoding:
                    chunked = true
                case .te, .connectionSpecific, .other:
                    break
                }
                i = end + 2
            }
            guard i + 2 == count, fields <= limits.maxHeaders else { return }
            let endStream = !chunked && contentLengthZero != false
            parsed = (method, sp1, sp1 + 1, sp2 - 1, authority, fieldsStart, i, fields, endStream)
        }
        guard let parsed else { return nil }
        self.bytes = bytes
        method = parsed.method
        methodEnd = parsed.methodEnd
        pathStart = parsed.pathStart
        pathEnd = parsed.pathEnd
        authority = parsed.authority
        fieldsStart = parsed.fieldsStart
        fieldsEnd = parsed.fieldsEnd
        fieldCount = parsed.count
        endStream = parsed.endStream
    }

    /// The request target (`:path`).
    public var path: String {
        bytes.withUnsafeBytes { String(decoding: UnsafeRawBufferPointer(rebasing: $0[pathStart..<pathEnd]), as: UTF8.self) }
    }

    private enum Kind { case host, contentLength, transferEncoding, te, connectionSpecific, other }

    /// What a field (name lower-cased) is to the HTTP/2 head.
    private static func kind(_ name: UnsafeRawBufferPointer) -> Kind {
        switch name.count {
        case 2:
            if name[0] == UInt8(ascii: "t"), name[1] == UInt8(ascii: "e") { return .te }
        case 4:
            if HTTPSyntax.equalsLowercased(name, "host") { return .host }
        case 14:
            if HTTPSyntax.equalsLowercased(name, "content-length") { return .contentLength }
        case 17:
            if HTTPSyntax.equalsLowercased(name, "transfer-encoding") { return .transferEncoding }
        default:
            break
        }
        return HTTPHeaderName.isConnectionSpecific(name) ? .connectionSpecific : .other
    }

    /// Calls `body` with `:method`, `:scheme`, `:authority`, `:path` and the fields as `nghttp2_nv` (valid during the
    /// call; nghttp2 copies them). `x-request-id`, unique per request, is a literal never indexed (see
    /// `H2HeaderList.addNeverIndexed`): indexed, each request's id took an entry of the connection's HPACK table and,
    /// once it was full, evicted the fields that do repeat (the forwarded token among them, encoded again then).
    func withNV<R>(scheme: String, defaultAuthority: () -> String, _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        var scheme = scheme
        // Made only for a head without `Host` (the writer always writes one).
        var fallback = authority == nil ? defaultAuthority() : ""
        return scheme.withUTF8 { schemeBytes in
            fallback.withUTF8 { fallbackBytes in
                bytes.withUnsafeBufferPointer { raw in
                    withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: fieldCount + 5) { nva in
                        body(fill(nva, raw, scheme: schemeBytes, defaultAuthority: fallbackBytes))
                    }
                }
            }
        }
    }

    private func fill(_ nva: UnsafeMutableBufferPointer<nghttp2_nv>, _ raw: UnsafeBufferPointer<UInt8>,
                      scheme: UnsafeBufferPointer<UInt8>, defaultAuthority: UnsafeBufferPointer<UInt8>)
        -> UnsafeBufferPointer<nghttp2_nv> {
        // nghttp2 copies every name and value (flag NONE) and never writes through these pointers; its `nghttp2_nv`
        // only declares them mutable.
        let none = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        let never = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
        let base = UnsafeMutablePointer(mutating: raw.baseAddress!)
        var n = 0
        func put(_ name: StaticString, _ value: UnsafePointer<UInt8>?, _ count: Int) {
            nva[n] = .literal(name, value, count)
            n += 1
        }
        put(":method", base, methodEnd)
        put(":scheme", scheme.baseAddress, scheme.count)
        if let authority {
            put(":authority", base + authority.lowerBound, authority.count)
        } else {
            put(":authority", defaultAuthority.baseAddress, defaultAuthority.count)
        }
        put(":path", base + pathStart, pathEnd - pathStart)
        let b = UnsafeRawBufferPointer(raw)
        var i = fieldsStart
        while i < fieldsEnd, n < nva.count, let end = Self.lineEnd(b, from: i),
              let colon = Self.index(of: UInt8(ascii: ":"), in: b, i, end) {
            defer { i = end + 2 }
            let name = UnsafeRawBufferPointer(rebasing: b[i..<colon])
            let (vs, ve) = HTTPSyntax.trimOWS(b, colon + 1, end)
            let value = UnsafeRawBufferPointer(rebasing: b[vs..<ve])
            switch Self.kind(name) {
            case .other, .contentLength:
                guard HTTPSyntax.isFieldValue(value) else { continue }
                let flags = name.count == 12 && HTTPSyntax.equalsLowercased(name, "x-request-id") ? never : none
                nva[n] = nghttp2_nv(name: base + i, value: base + vs, namelen: colon - i, valuelen: ve - vs, flags: flags)
                n += 1
            case .te:
                // Only `trailers` may go (RFC 9113 §8.2.2); the writer writes `TE: trailers` or no `TE` at all.
                if HTTPSyntax.equalsLowercased(value, "trailers") { put("te", ("trailers" as StaticString).utf8Start, 8) }
            case .host, .transferEncoding, .connectionSpecific:
                break
            }
        }
        return UnsafeBufferPointer(start: nva.baseAddress, count: n)
    }

    /// The index of the CR of the CRLF ending the line that starts at `from`; nil when there is none or the first CR
    /// is bare. By `memchr` (a forwarded token's line is ~800 bytes). A bare LF is not looked for: the writer lets none
    /// into a value (and a value holding one would fail `isFieldValue`), names are tokens.
    private static func lineEnd(_ b: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard let base = b.baseAddress, from < b.count,
              let cr = memchr(base + from, 13, b.count - from) else { return nil }
        let i = base.distance(to: UnsafeRawPointer(cr))
        return i + 1 < b.count && b[i + 1] == 10 ? i : nil
    }

    private static func index(of byte: UInt8, in b: UnsafeRawBufferPointer, _ from: Int, _ to: Int) -> Int? {
        var i = from
        while i < to {
            if b[i] == byte { return i }
            i += 1
        }
        return nil
    }
}
