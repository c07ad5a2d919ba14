import Glibc

/// The five claims of a DPoP proof's payload that RFC 9449 §4.3 checks (`htm`, `htu`, `iat`, `ath`, `jti`), taken from
/// the decoded payload's bytes in one pass under exactly the rules of `StrictJSON.parse` (grammar, UTF-8, escapes,
/// numbers, depth, size, duplicate member names compared after unescaping as `String`s), without building the object:
/// a claim whose value is a string of plain printable ASCII (no escape) is kept as the range of its bytes in the
/// payload, any other claim value is parsed into a `JSONValue`, and every other member is checked and dropped. Unknown
/// members are allowed, as JSON allows them. Building the whole `JSONValue` tree (a `String` per name and value) cost
/// about 6,000 instructions per proof.
struct DPoPClaims {
    /// One claim's value.
    enum Value {
        /// A string without escapes whose bytes are all printable ASCII: the bytes between its quotes.
        case plain(Range<Int>)
        /// Anything else, as `StrictJSON` parses it (a string with escapes or non-ASCII text, a number, ...).
        case json(JSONValue)
    }

    var htm: Value?, htu: Value?, iat: Value?, ath: Value?, jti: Value?

    /// The claims of the JSON object `payload` (nil for anything `StrictJSON.parse` refuses or a value that is not an
    /// object). The first member of each name is the only one: a second is a duplicate, which is refused.
    static func scan(_ payload: UnsafeBufferPointer<UInt8>, maxDepth: Int = StrictJSON.defaultMaxDepth,
                     maxBytes: Int) -> DPoPClaims? {
        guard payload.count <= maxBytes else { return nil }
        // The first names' records for the duplicate check live on the stack (four words a name).
        return withUnsafeTemporaryAllocation(of: Int.self, capacity: 4 * StrictJSON.Parser.linearKeys) { names in
            var parser = StrictJSON.Parser(bytes: payload, maxDepth: maxDepth)
            var claims = DPoPClaims()
            do {
                parser.skipWhitespace()
                guard parser.peek == UInt8(ascii: "{"), let names = names.baseAddress else { return nil }
                try parser.scanDPoPClaims(into: &claims, names: names)
                parser.skipWhitespace()
                guard parser.position == payload.count else { return nil }
            } catch {
                return nil
            }
            return claims
        }
    }

    /// The UTF-8 bytes of string claim `value` (its plain bytes in `payload`, or its unescaped text), passed to `body`;
    /// `body` gets nil when the claim is missing or not a string.
    static func withText<R>(_ value: Value?, in payload: UnsafeBufferPointer<UInt8>,
                            _ body: (UnsafeBufferPointer<UInt8>?) -> R) -> R {
        switch value {
        case .plain(let range)?: return body(UnsafeBufferPointer(rebasing: payload[range]))
        case .json(.string(var text))?: return text.withUTF8 { body($0) }
        default: return body(nil)
        }
    }

    /// The claim's value as a number, nil when missing or not a number.
    static func number(_ value: Value?) -> Double? {
        if case .json(.number(let number, _))? = value { return number }
        return nil
    }

    /// Which claim a member name is: 0 `htm`, 1 `htu`, 2 `iat`, 3 `ath`, 4 `jti`, -1 any other.
    @inline(__always)
    static func slot(_ name: UnsafeBufferPointer<UInt8>) -> Int {
        guard name.count == 3 else { return -1 }
        switch (name[0], name[1], name[2]) {
        case (0x68, 0x74, 0x6D): return 0  // htm
        case (0x68, 0x74, 0x75): return 1  // htu
        case (0x69, 0x61, 0x74): return 2  // iat
        case (0x61, 0x74, 0x68): return 3  // ath
        case (0x6A, 0x74, 0x69): return 4  // jti
        default: return -1
        }
    }

    @inline(__always)
    mutating func set(_ slot: Int, _ value: Value) {
        switch slot {
        case 0: htm = value
        case 1: htu = value
        case 2: iat = value
        case 3: ath = value
        default: jti = value
        }
    }
}

extension StrictJSON.Parser {
    /// The top-level object of `DPoPClaims.scan` (depth 1, as `parseValue(depth: 0)` gives it), at its `{`, as
    /// `parseObject` reads it. Names are compared as `parseObject` compares them: two plain printable-ASCII names by
    /// their bytes (ASCII text has one canonical form, so that is `String` equality), any pair with another name as
    /// unescaped `String`s (a non-ASCII name may be canonically equivalent to an ASCII one: U+212A KELVIN SIGN and
    /// "K"). `names` has room for `4 * linearKeys` words: per name so far, its start and end in the input, -1
    /// for a plain name or the index of its unescaped text in `texts`, and a plain name's bytes packed
    /// (`JSONValue.ShortKey.bits`) when it has at most 8, which two such names of one length compare instead of
    /// calling `memcmp`.
    mutating func scanDPoPClaims(into claims: inout DPoPClaims, names: UnsafeMutablePointer<Int>) throws(StrictJSON.ParseError) {
        let depth = 1
        if depth > maxDepth { throw fail(.tooDeep) }
        position += 1  // {
        skipWhitespace()
        if peek == UInt8(ascii: "}") { position += 1; return }
        var count = 0
        var texts: [String] = []
        var seen: Set<String>? = nil
        while true {
            skipWhitespace()
            guard peek == UInt8(ascii: "\"") else { throw fail(.syntax) }
            let nameOffset = position
            let start = position + 1
            let end = plainStringEnd(from: start)
            let index: Int
            let slot: Int
            var packed: UInt64 = 0
            if end < bytes.count && bytes[end] == UInt8(ascii: "\"") {
                position = end + 1
                index = -1
                slot = DPoPClaims.slot(UnsafeBufferPointer(rebasing: bytes[start..<end]))
                if let short = JSONValue.ShortKey(in: bytes, from: start, to: end) { packed = short.bits }
            } else {
                var unescaped = try parseString()
                index = texts.count
                texts.append(unescaped)
                slot = unescaped.withUTF8 { DPoPClaims.slot($0) }
            }
            try recordMemberName(start: start, end: end, index: index, packed: packed, count: count,
                                 linear: Self.linearKeys, names: names, texts: texts, seen: &seen, offset: nameOffset)
            count += 1
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { throw fail(.syntax) }
            position += 1
            skipWhitespace()
            if slot >= 0 {
                let valueStart = position + 1
                let valueEnd = peek == UInt8(ascii: "\"") ? plainStringEnd(from: valueStart) : -1
                if valueEnd >= 0 && valueEnd < bytes.count && bytes[valueEnd] == UInt8(ascii: "\"") {
                    position = valueEnd + 1
                    claims.set(slot, .plain(valueStart..<valueEnd))
                } else {
                    claims.set(slot, .json(try parseValue(depth: depth)))
                }
            } else {
                try skipValue(depth: depth)
            }
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","): position += 1
            case UInt8(ascii: "}"): position += 1; return
            default: throw fail(.syntax)
            }
        }
    }
}

extension StrictJSON {
    /// For the `json` fuzz target: what the DPoP payload's one pass (`DPoPClaims.scan`) makes of `bytes` — nil when
    /// it refuses them, else `htm`, `htu`, `iat`, `ath`, `jti` as JSON values (a plain string kept as its bytes
    /// becomes `.string`), in that order. `parse` must accept exactly the same objects with the same values.
    @_spi(Fuzzing)
    public static func scannedDPoPClaims(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
                                         maxBytes: Int = defaultMaxBytes) -> [JSONValue?]? {
        bytes.withUnsafeBufferPointer { buffer -> [JSONValue?]? in
            guard let claims = DPoPClaims.scan(buffer, maxDepth: maxDepth, maxBytes: maxBytes) else { return nil }
            return [claims.htm, claims.htu, claims.iat, claims.ath, claims.jti].map { claim -> JSONValue? in
                switch claim {
                case .plain(let range)?: .string(String(decoding: UnsafeBufferPointer(rebasing: buffer[range]), as: UTF8.self))
                case .json(let value)?: value
                case nil: nil
                }
            }
        }
    }

    /// The claim names `scannedDPoPClaims` reports, in its order.
    @_spi(Fuzzing)
    public static var dpopClaimNames: [String] { ["htm", "htu", "iat", "ath", "jti"] }
}
