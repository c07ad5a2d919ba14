import CNghttp2

/// An HTTP/2 request head written field by field (RFC 9113 §8.3.1), as an `H2ClientSession` submits it: the gateway's
/// `RequestHeadWriter` writes it for an `h2` upstream straight from the client's head, where it used to write
/// HTTP/1.1 text that `H2ClientRequestHead` then parsed back (a copy, every name lower-cased, every line searched, every
/// value checked a second time: about 6,500 instructions per request of case G).
///
/// The bytes are records, one per field, each `Record.headerSize` bytes of lengths and flags followed by the name (lower
/// case, as the writer wrote it) and the value (as written; OWS around it is trimmed when submitting, as
/// `H2ClientRequestHead` trims it). The first record is `:method`'s value, the one at `layout.pathRecord` `:path`'s,
/// the one at `layout.authorityRecord` (if any) `:authority`'s; these three have no name and are left out of the field
/// walk. A record flagged `leftOut` (a value with a control byte other than HTAB, which `H2HeaderList` also leaves out)
/// is skipped. One copy of the bytes, which the upstream stream keeps for a resubmission after REFUSED_STREAM; the
/// `nghttp2_nv` array is made on the stack when submitting, pointing into it (nghttp2 copies the names and values).
public struct H2RequestFields {
    /// The record format (the writer and `withNV` agree on it through these alone).
    public enum Record {
        /// Bytes before a record's name: its name length, its value length and its flags, three `UInt32`s.
        public static let headerSize = 12
        /// Flag: the value is unique per request (`x-request-id`): a literal never indexed (see
        /// `H2HeaderList.addNeverIndexed`).
        public static let neverIndexed: UInt32 = 1
        /// Flag: the value holds a control byte other than HTAB; the field is not sent.
        public static let leftOut: UInt32 = 2

        /// Writes a record's header at `at` (unaligned).
        @inlinable @inline(__always)
        public static func writeHeader(at: UnsafeMutableRawPointer, nameCount: Int, valueCount: Int, flags: UInt32) {
            at.storeBytes(of: UInt32(truncatingIfNeeded: nameCount), toByteOffset: 0, as: UInt32.self)
            at.storeBytes(of: UInt32(truncatingIfNeeded: valueCount), toByteOffset: 4, as: UInt32.self)
            at.storeBytes(of: flags, toByteOffset: 8, as: UInt32.self)
        }
    }

    /// Where the pseudo fields' records are, and what the writer counted.
    public struct Layout: Equatable {
        /// Offset of `:path`'s record (`:method`'s is at 0).
        public var pathRecord = 0
        /// Offset of `:authority`'s record; -1 when there is none (the session's default authority is sent).
        public var authorityRecord = -1
        /// Records, pseudo ones and left-out ones included: an upper bound of the fields sent.
        public var records = 0
        /// No body follows: HEADERS carries END_STREAM.
        public var endStream = true

        public init() {}
    }

    /// The records.
    public let bytes: [UInt8]
    /// Where the pseudo fields are.
    public let layout: Layout

    /// Copies `records` (written by the gateway's writer in the format of `Record`, described by `layout`).
    public init(records: UnsafeRawBufferPointer, layout: Layout) {
        bytes = [UInt8](records)
        self.layout = layout
    }

    /// No body follows: HEADERS carries END_STREAM.
    public var endStream: Bool { layout.endStream }

    /// The request method (`:method`).
    public var method: String { value(at: 0) }

    /// The request target (`:path`).
    public var path: String { value(at: layout.pathRecord) }

    private func value(at record: Int) -> String {
        bytes.withUnsafeBytes { raw in
            let (start, count) = Self.valueRange(raw, at: record)
            return String(decoding: UnsafeRawBufferPointer(rebasing: raw[start..<(start + count)]), as: UTF8.self)
        }
    }

    /// Calls `body` with every field sent after the pseudo fields, in order: its name, its value (OWS-trimmed) and
    /// whether it is never indexed. For tests and logs; `withNV` is what the session submits.
    public func forEachField(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, _ neverIndexed: Bool) -> Void) {
        bytes.withUnsafeBytes { raw in
            Self.walk(raw) { nameStart, nameCount, valueStart, valueCount, flags in
                body(UnsafeRawBufferPointer(rebasing: raw[nameStart..<(nameStart + nameCount)]),
                     UnsafeRawBufferPointer(rebasing: raw[valueStart..<(valueStart + valueCount)]),
                     flags & Record.neverIndexed != 0)
            }
        }
    }

    /// A record's value (untrimmed): its start and length.
    @inline(__always)
    private static func valueRange(_ raw: UnsafeRawBufferPointer, at record: Int) -> (Int, Int) {
        let base = raw.baseAddress!
        let nameCount = Int(base.loadUnaligned(fromByteOffset: record, as: UInt32.self))
        let valueCount = Int(base.loadUnaligned(fromByteOffset: record + 4, as: UInt32.self))
        return (record + Record.headerSize + nameCount, valueCount)
    }

    /// The records with a name and not left out, in order, their values OWS-trimmed.
    @inline(__always)
    private static func walk(_ raw: UnsafeRawBufferPointer,
                             _ field: (_ nameStart: Int, _ nameCount: Int, _ valueStart: Int, _ valueCount: Int,
                                       _ flags: UInt32) -> Void) {
        guard let base = raw.baseAddress else { return }
        var i = 0
        let end = raw.count
        while i + Record.headerSize <= end {
            let nameCount = Int(base.loadUnaligned(fromByteOffset: i, as: UInt32.self))
            let valueCount = Int(base.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self))
            let flags = base.loadUnaligned(fromByteOffset: i + 8, as: UInt32.self)
            let nameStart = i + Record.headerSize
            var vs = nameStart + nameCount
            i = vs + valueCount
            guard nameCount > 0, flags & Record.leftOut == 0, i <= end else { continue }
            var ve = i
            while vs < ve, HTTPSyntax.isWhitespace(raw[vs]) { vs += 1 }
            while ve > vs, HTTPSyntax.isWhitespace(raw[ve - 1]) { ve -= 1 }
            field(nameStart, nameCount, vs, ve - vs, flags)
        }
    }

    /// Calls `body` with `:method`, `:scheme`, `:authority`, `:path` and the fields as `nghttp2_nv`, as
    /// `H2ClientRequestHead.withNV` does for a head written as HTTP/1.1. The names and values in `bytes` are flagged not
    /// to be copied: whoever submits them keeps `bytes` until the HEADERS frame is sent or given up
    /// (`H2ClientSession.submitRequest(_:scheme:defaultAuthority:)` does).
    func withNV<R>(scheme: String, defaultAuthority: () -> String, _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        var scheme = scheme
        // Made only for a head without an authority (the writer always writes one).
        var fallback = layout.authorityRecord < 0 ? defaultAuthority() : ""
        return scheme.withUTF8 { schemeBytes in
            fallback.withUTF8 { fallbackBytes in
                bytes.withUnsafeBytes { raw in
                    withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: layout.records + 2) { nva in
                        body(fill(nva, raw, scheme: schemeBytes, defaultAuthority: fallbackBytes))
                    }
                }
            }
        }
    }

    private func fill(_ nva: UnsafeMutableBufferPointer<nghttp2_nv>, _ raw: UnsafeRawBufferPointer,
                      scheme: UnsafeBufferPointer<UInt8>, defaultAuthority: UnsafeBufferPointer<UInt8>)
        -> UnsafeBufferPointer<nghttp2_nv> {
        // nghttp2 never writes through these pointers (its `nghttp2_nv` only declares them mutable), and copies none
        // of what points into `bytes` nor the literal names (NO_COPY_NAME, NO_COPY_VALUE): it reads them when it
        // serialises the HEADERS frame, and the session holds `bytes` until then (`H2ClientSession.heldHeads`). The
        // copy was a memcpy of every name and value (an App Check token's ~800 bytes) and a byte-by-byte lower-casing
        // of every name, which the writer lower-cased already. `:scheme` and a default `:authority` are copied.
        let borrowed = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
        let never = borrowed | UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
        guard let start = raw.baseAddress, nva.count >= 4 else { return UnsafeBufferPointer(start: nil, count: 0) }
        let base = UnsafeMutablePointer(mutating: start.assumingMemoryBound(to: UInt8.self))
        var n = 0
        func put(_ name: StaticString, _ value: UnsafePointer<UInt8>?, _ count: Int, inBytes: Bool = true) {
            nva[n] = .literal(name, value, count)
            nva[n].flags = inBytes ? borrowed : UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue)
            n += 1
        }
        let (methodStart, methodCount) = Self.valueRange(raw, at: 0)
        put(":method", base + methodStart, methodCount)
        put(":scheme", scheme.baseAddress, scheme.count, inBytes: false)
        if layout.authorityRecord >= 0 {
            var (vs, count) = Self.valueRange(raw, at: layout.authorityRecord)
            var ve = vs + count
            while vs < ve, HTTPSyntax.isWhitespace(raw[vs]) { vs += 1 }
            while ve > vs, HTTPSyntax.isWhitespace(raw[ve - 1]) { ve -= 1 }
            count = ve - vs
            put(":authority", base + vs, count)
        } else {
            put(":authority", defaultAuthority.baseAddress, defaultAuthority.count, inBytes: false)
        }
        let (pathStart, pathCount) = Self.valueRange(raw, at: layout.pathRecord)
        put(":path", base + pathStart, pathCount)
        Self.walk(raw) { nameStart, nameCount, valueStart, valueCount, flags in
            guard n < nva.count else { return }
            nva[n] = nghttp2_nv(name: base + nameStart, value: base + valueStart, namelen: nameCount, valuelen: valueCount,
                                flags: flags & Record.neverIndexed != 0 ? never : borrowed)
            n += 1
        }
        return UnsafeBufferPointer(start: nva.baseAddress, count: n)
    }
}
