import CNghttp2

/// Response header fields collected into one byte buffer, then exposed as an `nghttp2_nv` array.
public struct H2HeaderList {
    private var storage: [UInt8] = []
    private var spans: [(name: Int, nameLength: Int, value: Int, valueLength: Int, flags: UInt8)] = []
    private var connectionTokens: [[UInt8]] = []

    /// An empty list; `capacity` bytes of names and values and 16 fields are reserved when `capacity` is not 0. An
    /// empty one allocates nothing: `H2Connection.takeHeaderList` makes one per response only to swap it with the
    /// list it keeps, and the 16 fields reserved here were an allocation per response.
    public init(capacity: Int = 0) {
        guard capacity > 0 else { return }
        storage.reserveCapacity(capacity)
        spans.reserveCapacity(16)
    }

    /// Empties the list for reuse, keeping its storage unless it grew past `keepingUpTo` bytes (a list reused from
    /// response to response allocates nothing; `reserve` makes sure the next one fits).
    public mutating func removeAll(keepingUpTo limit: Int) {
        if storage.capacity > limit { storage = [] } else { storage.removeAll(keepingCapacity: true) }
        if spans.capacity > 64 { spans = [] } else { spans.removeAll(keepingCapacity: true) }
        if !connectionTokens.isEmpty { connectionTokens = [] }
    }

    /// Reserves room for `capacity` bytes of names and values and 16 fields.
    public mutating func reserve(_ capacity: Int) {
        storage.reserveCapacity(capacity)
        spans.reserveCapacity(16)
    }

    /// Adds one field: the name lower-cased, the value OWS-trimmed. Dropped: a name that is not a token, a value
    /// with a control byte, and the connection-specific fields of RFC 9113 §8.2.2 (`connection`, `keep-alive`,
    /// `proxy-connection`, `transfer-encoding`, `upgrade`, `te`); fields named in `Connection` are left out too.
    public mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        add(name, value, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
    }

    /// `add` for a value unique to its response (a request id): sent as a literal never indexed (RFC 7541 §6.2.3). An
    /// indexed one would take a new entry of the connection's HPACK dynamic table per response, evicting the fields
    /// that do repeat (`date`, `server`, …), and nghttp2's encoder walks every entry of the same name (its table is
    /// hashed by name) comparing names and values: a hundred `memcmp` per response once the table is full of them.
    public mutating func addNeverIndexed(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        add(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), value,
            flags: UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue))
    }

    private mutating func add(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, flags: UInt8) {
        // Whether the name is a token is checked as it is lower-cased below (one pass over its bytes): a name that
        // is not one never equals a connection-specific name, so the check can wait until then.
        guard !name.isEmpty, HTTPSyntax.isFieldValue(value) else { return }
        if HTTPHeaderName.isConnectionSpecific(name) || (name.count == 2 && HTTPSyntax.equalsLowercased(name, "te")) {
            if name.count == 10, HTTPSyntax.equalsLowercased(name, "connection") {
                HTTPHeaders.forEachListElement(value) { token in
                    connectionTokens.append(token.map(HTTPSyntax.lowercased))
                    return true
                }
            }
            return
        }
        let (lower, upper) = HTTPSyntax.trimOWS(value, 0, value.count)
        let nameStart = storage.count
        storage.appendBytes(name)
        let token = storage.withUnsafeMutableBufferPointer { bytes in
            for i in nameStart..<bytes.count {
                let b = bytes[i]
                guard HTTPSyntax.isTChar(b) else { return false }
                bytes[i] = HTTPSyntax.lowercased(b)
            }
            return true
        }
        guard token else {
            storage.removeSubrange(nameStart...)
            return
        }
        let valueStart = storage.count
        storage.appendBytes(UnsafeRawBufferPointer(rebasing: value[lower..<upper]))
        spans.append((nameStart, name.count, valueStart, upper - lower, flags))
    }

    /// `add` for a field its parser already checked: what an upstream's response head or trailers hold, from
    /// `HTTPResponseHeadParser` and the chunked decoder (`FieldLine.validate`: the name a token, the value of field-value
    /// bytes, OWS-trimmed) or from `H2ClientSession` (nghttp2's checks and its own: a lower-case token, a field value
    /// without OWS around it, nothing connection-specific), with the hop-by-hop fields and those `Connection` names
    /// already removed by the caller's filter. Only the name is lower-cased: `add` checked every field a second time
    /// (value bytes, name bytes, connection-specific names, OWS), ~100 instructions a field of every proxied response
    /// over HTTP/2. A field breaking those preconditions is sent as it is (nghttp2 still frames it safely).
    public mutating func addChecked(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) {
        let nameStart = storage.count
        storage.appendBytes(name)
        storage.withUnsafeMutableBufferPointer { bytes in
            for i in nameStart..<bytes.count { bytes[i] = HTTPSyntax.lowercased(bytes[i]) }
        }
        let valueStart = storage.count
        storage.appendBytes(value)
        spans.append((nameStart, name.count, valueStart, value.count, UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
    }

    /// `add` for strings (names and values the gateway makes itself).
    public mutating func add(_ name: String, _ value: String) {
        var name = name
        var value = value
        name.withUTF8 { n in value.withUTF8 { v in add(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) } }
    }

    /// `add` for a literal name (no `String` made or bridged).
    public mutating func add(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        add(UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount), value)
    }

    /// `add` for a literal name and a decimal number as the value (written on the stack, no `String`).
    public mutating func add(_ name: StaticString, decimal: Int64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { raw in
            var n = decimal.magnitude
            var start = raw.count
            repeat {
                start -= 1
                raw[start] = UInt8(ascii: "0") &+ UInt8(n % 10)
                n /= 10
            } while n > 0
            if decimal < 0 {
                start -= 1
                raw[start] = UInt8(ascii: "-")
            }
            add(name, UnsafeRawBufferPointer(rebasing: raw[start...]))
        }
    }

    /// `te: trailers`, the one `TE` value HTTP/2 allows (RFC 9113 §8.2.2), which `add` drops with the other
    /// connection-specific fields: a request to an HTTP/2 upstream says with it that it accepts trailers (gRPC needs it).
    public mutating func addTETrailers() {
        let nameStart = storage.count
        storage.append(contentsOf: "te".utf8)
        let valueStart = storage.count
        storage.append(contentsOf: "trailers".utf8)
        spans.append((nameStart, 2, valueStart, 8, UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
    }

    /// Whether no field was kept.
    public var isEmpty: Bool { spans.isEmpty }

    /// Calls `body` with the `pseudo` fields (names with their colon, in order) followed by the kept fields as
    /// `nghttp2_nv` (valid during the call): a request head, or trailers when `pseudo` is empty.
    func withNV<R>(pseudo: [(String, String)], _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        if pseudo.isEmpty { return withFieldsNV(body) }
        var bytes: [UInt8] = []
        var ranges: [(Int, Int, Int, Int, UInt8)] = []
        for (name, value) in pseudo {
            let n = bytes.count
            bytes.append(contentsOf: name.utf8)
            let v = bytes.count
            bytes.append(contentsOf: value.utf8)
            ranges.append((n, name.utf8.count, v, value.utf8.count, UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
        }
        let shift = bytes.count
        bytes.append(contentsOf: storage)
        let tokens = connectionTokens
        for span in spans {
            if !tokens.isEmpty {
                let name = bytes[(shift + span.name)..<(shift + span.name + span.nameLength)]
                if tokens.contains(where: { $0.elementsEqual(name) }) { continue }
            }
            ranges.append((shift + span.name, span.nameLength, shift + span.value, span.valueLength, span.flags))
        }
        if ranges.isEmpty { return body(UnsafeBufferPointer(start: nil, count: 0)) }
        return bytes.withUnsafeMutableBufferPointer { raw in
            var nva: [nghttp2_nv] = []
            nva.reserveCapacity(ranges.count)
            guard let base = raw.baseAddress else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
            for r in ranges {
                nva.append(nghttp2_nv(name: base + r.0, value: base + r.2, namelen: r.1, valuelen: r.3, flags: r.4))
            }
            return nva.withUnsafeBufferPointer(body)
        }
    }

    /// `withNV(pseudo:)` without pseudo fields (trailers): the fields in `storage` as they are, the array on the stack.
    /// Copying the storage behind an empty prefix and building the array on the heap cost ~2,200 instructions per
    /// gRPC response's trailers.
    private func withFieldsNV<R>(_ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        let tokens = connectionTokens
        return storage.withUnsafeBufferPointer { raw in
            guard let start = raw.baseAddress, !spans.isEmpty else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
            let base = UnsafeMutablePointer(mutating: start)
            return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: spans.count) { nva in
                var count = 0
                for span in spans {
                    if !tokens.isEmpty {
                        let name = UnsafeBufferPointer(start: base + span.name, count: span.nameLength)
                        if tokens.contains(where: { $0.elementsEqual(name) }) { continue }
                    }
                    nva[count] = nghttp2_nv(name: base + span.name, value: base + span.value, namelen: span.nameLength,
                                            valuelen: span.valueLength, flags: span.flags)
                    count += 1
                }
                return body(UnsafeBufferPointer(start: count > 0 ? nva.baseAddress : nil, count: count))
            }
        }
    }

    /// Calls `body` with `:status` followed by the kept fields as `nghttp2_nv` (valid during the call).
    func withNV<R>(status: Int, _ body: (UnsafeBufferPointer<nghttp2_nv>) -> R) -> R {
        // `:status` and its three digits live on the stack, the fields in `storage` as they are (no copy of the
        // list). nghttp2 copies every name and value (flag NONE) and never writes through these pointers; its
        // `nghttp2_nv` just declares them mutable.
        let statusName: StaticString = ":status"
        var digits: (UInt8, UInt8, UInt8) = (0, 0, 0)
        let code = min(max(status, 100), 999)
        digits.0 = UInt8(ascii: "0") &+ UInt8(code / 100)
        digits.1 = UInt8(ascii: "0") &+ UInt8(code / 10 % 10)
        digits.2 = UInt8(ascii: "0") &+ UInt8(code % 10)
        let flags = UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
        let tokens = connectionTokens
        return withUnsafeMutableBytes(of: &digits) { digitBytes in
            storage.withUnsafeBufferPointer { raw in
                let base = UnsafeMutablePointer(mutating: raw.baseAddress ?? statusName.utf8Start)
                // On the stack for a usual list (no array per response).
                return withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: spans.count + 1) { nva in
                    let nv = nva.baseAddress!
                    nv.initialize(to: nghttp2_nv(name: UnsafeMutablePointer(mutating: statusName.utf8Start),
                                                 value: digitBytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                 namelen: 7, valuelen: 3, flags: flags))
                    var count = 1
                    for span in spans {
                        if !tokens.isEmpty {
                            let name = UnsafeBufferPointer(start: base + span.name, count: span.nameLength)
                            if tokens.contains(where: { $0.elementsEqual(name) }) { continue }
                        }
                        (nv + count).initialize(to: nghttp2_nv(name: base + span.name, value: base + span.value,
                                                               namelen: span.nameLength, valuelen: span.valueLength,
                                                               flags: span.flags))
                        count += 1
                    }
                    return body(UnsafeBufferPointer(start: nv, count: count))
                }
            }
        }
    }
}
