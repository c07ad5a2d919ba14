/// A strict RFC 8259 JSON parser for untrusted token and key-set bytes.
///
/// Unlike Foundation's `JSONSerialization` it refuses what an attacker could use to make two parsers
/// disagree: duplicate object keys (anywhere, compared after unescaping), invalid UTF-8 (overlong forms,
/// surrogates, code points above U+10FFFF), lone or mispaired `\u` surrogates, a byte order mark, leading
/// zeros, `+`, `.5`, `1.`, non-finite numbers (`1e999`), control characters in strings, comments, trailing
/// commas and anything after the top-level value but whitespace (RFC 8259 §2: space, tab, LF, CR).
/// Nesting is limited to `maxDepth` arrays/objects and the input to `maxBytes` bytes.
public enum StrictJSON {
    /// Why the input was refused; `offset` is the byte position where parsing stopped.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The kind of failure.
        public enum Kind: String, Sendable, Equatable {
            /// The input is longer than the `maxBytes` limit.
            case tooLarge = "input too large"
            /// Arrays/objects are nested deeper than the `maxDepth` limit.
            case tooDeep = "nesting too deep"
            /// An object has the same key twice.
            case duplicateKey = "duplicate key"
            /// A string is not valid UTF-8 or holds a lone surrogate escape.
            case invalidUnicode = "invalid Unicode"
            /// A number literal is not RFC 8259 grammar or is not finite as a Double.
            case invalidNumber = "invalid number"
            /// Any other grammar violation, including trailing bytes.
            case syntax = "syntax error"
        }
        /// The kind of failure.
        public let kind: Kind
        /// Byte offset in the input.
        public let offset: Int
        /// `kind at byte offset`.
        public var description: String { "\(kind.rawValue) at byte \(offset)" }
    }

    /// Default nesting limit (arrays and objects together).
    public static let defaultMaxDepth = 32
    /// Default input size limit: 1 MiB.
    public static let defaultMaxBytes = 1 << 20

    /// Parses one JSON value that spans the whole input.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth, maxBytes: Int = defaultMaxBytes) throws(ParseError) -> JSONValue {
        if bytes.count > maxBytes { throw ParseError(kind: .tooLarge, offset: maxBytes) }
        return try bytes.withUnsafeBufferPointer { (buffer) throws(ParseError) -> JSONValue in
            var parser = Parser(bytes: buffer, maxDepth: maxDepth)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            if parser.position != buffer.count { throw ParseError(kind: .syntax, offset: parser.position) }
            return value
        }
    }

    /// The parser of `parse`; `StrictJSON+Scan.swift` adds the one pass of `scanObject`.
    struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        let maxDepth: Int
        var position = 0
        /// Where `parseString` takes plain strings from while `memoizing` (`StrictJSON.scanObject`).
        var strings: StringMemo? = nil
        var memoizing = false

        init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        /// The byte at `position`, or nil at the end; the only way the parser reads input.
        var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

        func fail(_ kind: ParseError.Kind) -> ParseError { ParseError(kind: kind, offset: position) }

        /// Inlined: a token's payload calls it about 25 times, nearly always to find no whitespace at all.
        @inline(__always)
        mutating func skipWhitespace() {
            while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                position += 1
            }
        }

        mutating func expect(_ literal: StaticString) throws(ParseError) {
            let count = literal.utf8CodeUnitCount
            let start = literal.utf8Start
            for i in 0..<count {
                guard peek == start[i] else { throw fail(.syntax) }
                position += 1
            }
        }

        mutating func parseValue(depth: Int) throws(ParseError) -> JSONValue {
            guard let byte = peek else { throw fail(.syntax) }
            switch byte {
            case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["):
                if memoizing, let strings { return try parseArray(depth: depth + 1, memo: strings) }
                return try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try expect("true"); return .bool(true)
            case UInt8(ascii: "f"): try expect("false"); return .bool(false)
            case UInt8(ascii: "n"): try expect("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
            default: throw fail(.syntax)
            }
        }

        mutating func parseObject(depth: Int) throws(ParseError) -> JSONValue {
            if depth > maxDepth { throw fail(.tooDeep) }
            position += 1  // {
            var members: [(key: String, value: JSONValue)] = []
            // A token's objects have a few to a dozen members: one allocation instead of growing 1, 2, 4, 8, 16.
            members.reserveCapacity(12)
            // Duplicate keys: a linear scan for the first 16 members (a token's objects are that small), a Set after.
            var seen: Set<String>? = nil
            skipWhitespace()
            if peek == UInt8(ascii: "}") { position += 1; return .object(members) }
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\"") else { throw fail(.syntax) }
                let keyOffset = position
                let key = try parseString()
                // Swift's String equality (and so Set) treats canonically equivalent strings as equal: stricter
                // than byte equality, which is what we want for a duplicate check.
                if members.count < 16 {
                    for member in members where member.key == key {
                        throw ParseError(kind: .duplicateKey, offset: keyOffset)
                    }
                } else {
                    if seen == nil { seen = Set(members.map(\.key)) }
                    if !seen!.insert(key).inserted { throw ParseError(kind: .duplicateKey, offset: keyOffset) }
                }
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { throw fail(.syntax) }
                position += 1
                skipWhitespace()
                let value = try parseValue(depth: depth)
                members.append((key: key, value: value))
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "}"): position += 1; return .object(members)
                default: throw fail(.syntax)
                }
            }
        }

        /// The end of the run of plain string bytes (printable ASCII but `"` and `\`) from `start`: where a string
        /// without escapes or non-ASCII bytes has its closing quote.
        @inline(__always)
        func plainStringEnd(from start: Int) -> Int {
            var scan = start
            // Eight bytes a step while none of them can end the run (a byte below 0x20 or from 0x80, `"`, `\`);
            // the bytewise loop below finds the exact end. Each test is exact as a yes/no (no word with such a
            // byte passes it), so no end is skipped.
            if let base = bytes.baseAddress {
                let raw = UnsafeRawPointer(base)
                let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
                while scan + 8 <= bytes.count {
                    let word = raw.loadUnaligned(fromByteOffset: scan, as: UInt64.self)
                    let quote = word ^ (ones &* 0x22), backslash = word ^ (ones &* 0x5C)
                    let control = (word &- ones &* 0x20) & ~word          // some byte < 0x20
                    let quoteZero = (quote &- ones) & ~quote             // some byte == 0x22
                    let backslashZero = (backslash &- ones) & ~backslash // some byte == 0x5C
                    if (word | control | quoteZero | backslashZero) & highs != 0 { break }
                    scan += 8
                }
            }
            while scan < bytes.count {
                let byte = bytes[scan]
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
                scan += 1
            }
            return scan
        }

        /// `parseArray` through `memo` (`StrictJSON.scanObject`'s chosen members): an array whose bytes are those of
        /// one remembered is that array, else it is parsed and offered to the memo.
        mutating func parseArray(depth: Int, memo: StringMemo) throws(ParseError) -> JSONValue {
            if depth > maxDepth { throw fail(.tooDeep) }
            if let (value, end) = memo.array(in: bytes, at: position) {
                position = end
                return value
            }
            let start = position
            let value = try parseArray(depth: depth)
            memo.rememberArray(UnsafeBufferPointer(rebasing: bytes[start..<position]), value)
            return value
        }

        mutating func parseArray(depth: Int) throws(ParseError) -> JSONValue {
            if depth > maxDepth { throw fail(.tooDeep) }
            position += 1  // [
            var values: [JSONValue] = []
            skipWhitespace()
            if peek == UInt8(ascii: "]") { position += 1; return .array(values) }
            // One allocation for a short array (a token's `aud` has one or two members) instead of growing 1, 2, 4.
            values.reserveCapacity(4)
            while true {
                skipWhitespace()
                values.append(try parseValue(depth: depth))
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): position += 1
                case UInt8(ascii: "]"): position += 1; return .array(values)
                default: throw fail(.syntax)
                }
            }
        }

        mutating func parseHex4() throws(ParseError) -> UInt32 {
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let byte = peek else { throw fail(.syntax) }
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw fail(.syntax)
                }
                value = value << 4 | digit
                position += 1
            }
            return value
        }

        static func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
            switch scalar {
            case 0..<0x80:
                out.append(UInt8(scalar))
            case 0x80..<0x800:
                out.append(UInt8(0xC0 | (scalar >> 6)))
                out.append(UInt8(0x80 | (scalar & 0x3F)))
            case 0x800..<0x10000:
                out.append(UInt8(0xE0 | (scalar >> 12)))
                out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
                out.append(UInt8(0x80 | (scalar & 0x3F)))
            default:
                out.append(UInt8(0xF0 | (scalar >> 18)))
                out.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
                out.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
                out.append(UInt8(0x80 | (scalar & 0x3F)))
            }
        }

        /// Reads one continuation byte (10xxxxxx) in `range`.
        mutating func continuation(_ range: ClosedRange<UInt8> = 0x80...0xBF) throws(ParseError) -> UInt8 {
            guard let byte = peek, range.contains(byte) else { throw fail(.invalidUnicode) }
            position += 1
            return byte
        }

        mutating func parseString() throws(ParseError) -> String {
            position += 1  // opening quote
            // Fast path: printable ASCII without escapes (every key and most values of a token) becomes a String
            // straight from the input, with no intermediate array.
            let start = position
            let scan = plainStringEnd(from: start)
            if scan < bytes.count && bytes[scan] == UInt8(ascii: "\"") {
                position = scan + 1
                let plain = UnsafeBufferPointer(rebasing: bytes[start..<scan])
                if memoizing, let strings { return strings.string(plain) }
                return String(decoding: plain, as: UTF8.self)
            }
            var out: [UInt8] = []
            out.reserveCapacity(scan - start + 16)
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<scan]))
            position = scan
            while true {
                guard let byte = peek else { throw fail(.syntax) }
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    return String(decoding: out, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    position += 1
                    guard let escape = peek else { throw fail(.syntax) }
                    position += 1
                    switch escape {
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5C)
                    case UInt8(ascii: "/"): out.append(0x2F)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        let unit = try parseHex4()
                        var scalar = unit
                        if (0xDC00...0xDFFF).contains(unit) { throw fail(.invalidUnicode) }
                        if (0xD800...0xDBFF).contains(unit) {
                            guard peek == UInt8(ascii: "\\") else { throw fail(.invalidUnicode) }
                            position += 1
                            guard peek == UInt8(ascii: "u") else { throw fail(.invalidUnicode) }
                            position += 1
                            let low = try parseHex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw fail(.invalidUnicode) }
                            scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                        }
                        Self.appendUTF8(scalar, to: &out)
                    default:
                        throw fail(.syntax)
                    }
                case 0x00..<0x20:
                    throw fail(.syntax)
                case 0x20..<0x80:
                    out.append(byte)
                    position += 1
                case 0xC2...0xDF:
                    position += 1
                    out.append(byte)
                    out.append(try continuation())
                case 0xE0...0xEF:
                    position += 1
                    // Second-byte ranges exclude overlong forms (E0) and UTF-16 surrogates (ED).
                    let second: ClosedRange<UInt8> = byte == 0xE0 ? 0xA0...0xBF : (byte == 0xED ? 0x80...0x9F : 0x80...0xBF)
                    out.append(byte)
                    out.append(try continuation(second))
                    out.append(try continuation())
                case 0xF0...0xF4:
                    position += 1
                    // F0 must not be overlong; F4 must stay at or below U+10FFFF.
                    let second: ClosedRange<UInt8> = byte == 0xF0 ? 0x90...0xBF : (byte == 0xF4 ? 0x80...0x8F : 0x80...0xBF)
                    out.append(byte)
                    out.append(try continuation(second))
                    out.append(try continuation())
                    out.append(try continuation())
                default:
                    throw fail(.invalidUnicode)
                }
            }
        }

        mutating func digits() -> Int {
            var count = 0
            while let byte = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                position += 1
                count += 1
            }
            return count
        }

        /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        mutating func parseNumber() throws(ParseError) -> JSONValue {
            let start = position
            var isInteger = true
            var integerPart: Int64 = 0
            if peek == UInt8(ascii: "-") { position += 1 }
            guard let first = peek else { throw fail(.invalidNumber) }
            if first == UInt8(ascii: "0") {
                position += 1
                if let next = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(next) { throw fail(.invalidNumber) }
            } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(first) {
                // The integer part, its value kept as it is read (no second pass below); it cannot overflow before
                // 19 digits, and only up to 15 are used. A local index, stored back once: the loop kept `position`
                // in memory, about 15 instructions a digit (an `iat` has ten).
                var value: Int64 = 0
                var at = position
                let end = bytes.count
                // Eight digits at once when the next eight bytes are all digits (an `iat` or `exp` has ten): their
                // value by three multiply-and-add steps on the word (the first digit in its lowest byte), the same as
                // the loop's eight steps (all eight are within its 18 digits).
                if end &- at >= 8, let base = bytes.baseAddress {
                    let word = UnsafeRawPointer(base + at).loadUnaligned(as: UInt64.self)
                    // A byte is a digit exactly when its high nibble is 3, and still 3 after adding 6.
                    let nibbles: UInt64 = 0xF0F0_F0F0_F0F0_F0F0
                    if (word & nibbles) | (((word &+ 0x0606_0606_0606_0606) & nibbles) >> 4) == 0x3333_3333_3333_3333 {
                        var digits = UInt64(littleEndian: word) &- 0x3030_3030_3030_3030
                        digits = (digits &* 10 &+ (digits >> 8)) & 0x00FF_00FF_00FF_00FF
                        digits = (digits &* 100 &+ (digits >> 16)) & 0x0000_FFFF_0000_FFFF
                        digits = (digits &* 10_000 &+ (digits >> 32)) & 0xFFFF_FFFF
                        value = Int64(digits)
                        at &+= 8
                    }
                }
                while at < end {
                    let digit = bytes[at] &- UInt8(ascii: "0")
                    guard digit < 10 else { break }
                    if at &- start < 18 { value = value &* 10 &+ Int64(digit) }
                    at &+= 1
                }
                position = at
                integerPart = value
            } else {
                throw fail(.invalidNumber)
            }
            if peek == UInt8(ascii: ".") {
                isInteger = false
                position += 1
                if digits() == 0 { throw fail(.invalidNumber) }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                isInteger = false
                position += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { position += 1 }
                if digits() == 0 { throw fail(.invalidNumber) }
            }
            // Integers of up to 15 digits (every `iat` and `exp`) are exact in a Double: no text round trip.
            if isInteger && position - start <= 15 {
                let magnitude = integerPart  // 0 for "0" and "-0"
                let negative = bytes[start] == UInt8(ascii: "-")
                // (`-0` keeps its sign through the text path below.)
                if !(negative && magnitude == 0) {
                    return .number(Double(negative ? -magnitude : magnitude), isInteger: true)
                }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
            guard let value = Double(text), value.isFinite else { throw ParseError(kind: .invalidNumber, offset: start) }
            return .number(value, isInteger: isInteger)
        }
    }
}

