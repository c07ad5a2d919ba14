import Glibc

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

    /// Up to `MemberSlots.count` member values that `scanObject` keeps, by slot (`v0` is slot 0, …). Separate stored
    /// properties, not a tuple: reading one slot then copies that value alone.
    struct MemberSlots {
        static let count = 9
        var v0: JSONValue?, v1: JSONValue?, v2: JSONValue?, v3: JSONValue?, v4: JSONValue?, v5: JSONValue?
        var v6: JSONValue?, v7: JSONValue?, v8: JSONValue?

        mutating func set(_ slot: Int, _ value: JSONValue) {
            switch slot {
            case 0: v0 = value
            case 1: v1 = value
            case 2: v2 = value
            case 3: v3 = value
            case 4: v4 = value
            case 5: v5 = value
            case 6: v6 = value
            case 7: v7 = value
            default: v8 = value
            }
        }
    }

    /// A few strings to hand out again (one thread's, not shared): `scanObject` gives a plain printable-ASCII string
    /// of a chosen member whose bytes equal one of them that String (its storage shared), else a new one that it
    /// remembers, the oldest replaced first. The value is the same either way.
    final class StringMemo {
        static let capacity = 8
        /// Each remembered string with a copy of its bytes (owned here), read in place: looking one up retains
        /// nothing but the String it returns.
        private struct Entry {
            let bytes: UnsafeMutablePointer<UInt8>
            let count: Int
            let string: String
        }
        private var entries: [Entry] = []
        private var next = 0

        init() {}

        deinit {
            for entry in entries { entry.bytes.deallocate() }
        }

        /// The String of the plain ASCII `bytes`: a remembered one, or a new one, then remembered.
        func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
            let count = bytes.count
            guard let base = bytes.baseAddress, count > 0 else { return "" }
            let found = entries.withUnsafeBufferPointer { stored -> Int in
                for i in stored.indices where stored[i].count == count && memcmp(stored[i].bytes, base, count) == 0 {
                    return i
                }
                return -1
            }
            if found >= 0 { return entries[found].string }
            let string = String(decoding: bytes, as: UTF8.self)
            let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: count)
            copy.initialize(from: base, count: count)
            let entry = Entry(bytes: copy, count: count, string: string)
            if entries.count < Self.capacity {
                entries.append(entry)
            } else {
                entries[next].bytes.deallocate()
                entries[next] = entry
                next = (next + 1) % Self.capacity
            }
            return string
        }
    }

    /// Checks that `bytes` is one JSON object spanning the whole input under exactly the rules of `parse` (the same
    /// grammar, UTF-8, escape, number, depth and size rules, duplicate keys compared after unescaping with `String`
    /// equality), without building it: only the values of the members that `select` gives a slot
    /// (`0..<MemberSlots.count`, by the member's name when it is at most 8 bytes; -1 for the rest) are built, into
    /// `slots` (keys are unique; a slot that several names share keeps the last of them). The other values are checked and dropped; a
    /// string among them is not copied when it is plain printable ASCII. Throws where `parse` would, and `syntax`
    /// for a top-level value that is not an object.
    static func scanObject(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth, maxBytes: Int = defaultMaxBytes,
                           into slots: inout MemberSlots, select: (JSONValue.ShortKey?) -> Int) throws(ParseError) {
        try bytes.withUnsafeBufferPointer { (buffer) throws(ParseError) in
            try scanObject(buffer, maxDepth: maxDepth, maxBytes: maxBytes, into: &slots, select: select)
        }
    }

    /// `scanObject` on the bytes at `buffer`. The plain strings in the values of the slots in `memoSlots` (bit `i`
    /// for slot `i`) come from `strings` when it is given.
    static func scanObject(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth,
                           maxBytes: Int = defaultMaxBytes, into slots: inout MemberSlots,
                           strings: StringMemo? = nil, memoSlots: Int = 0,
                           select: (JSONValue.ShortKey?) -> Int) throws(ParseError) {
        if buffer.count > maxBytes { throw ParseError(kind: .tooLarge, offset: maxBytes) }
        // The first keys' positions for the duplicate check live on the stack (four words a key).
        let result = withUnsafeTemporaryAllocation(of: Int.self, capacity: 4 * Parser.linearKeys) { keys in
            Result { () throws(ParseError) in
                var parser = Parser(bytes: buffer, maxDepth: maxDepth)
                parser.skipWhitespace()
                guard parser.peek == UInt8(ascii: "{") else { throw parser.fail(.syntax) }
                parser.strings = strings
                try parser.scanObject(into: &slots, select: select, memoSlots: memoSlots, keys: keys.baseAddress!)
                parser.skipWhitespace()
                if parser.position != buffer.count { throw ParseError(kind: .syntax, offset: parser.position) }
            }
        }
        try result.get()
    }

    private struct Parser {
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
            case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
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

        /// Keys checked for duplicates by a linear scan (a token's objects are smaller); a `Set` after.
        static let linearKeys = 16

        /// The top-level object of `StrictJSON.scanObject` (depth 1, as `parseValue(depth: 0)` gives it), at its `{`.
        /// `keys` has room for `4 * linearKeys` words.
        ///
        /// The keys so far, for the duplicate check, are four words each: start and end in the input; -1 for a plain
        /// printable-ASCII key (no String made), or the index in `texts` of the unescaped String of any other; and a
        /// plain key's bytes packed (`JSONValue.ShortKey.bits`) when it has at most 8, which two such keys of one
        /// length compare instead. Two plain keys are equal exactly when their bytes are (ASCII text has one canonical form); a pair with
        /// another key compares as Strings, as `parseObject` does (a non-ASCII key may be canonically equivalent to
        /// an ASCII one: U+212A KELVIN SIGN and "K").
        mutating func scanObject(into slots: inout MemberSlots, select: (JSONValue.ShortKey?) -> Int, memoSlots: Int,
                                 keys: UnsafeMutablePointer<Int>) throws(ParseError) {
            let depth = 1
            if depth > maxDepth { throw fail(.tooDeep) }
            position += 1  // {
            var count = 0
            var texts: [String] = []
            var seen: Set<String>? = nil
            func text(_ start: Int, _ end: Int, _ index: Int) -> String {
                index >= 0 ? texts[index] : String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            }
            skipWhitespace()
            if peek == UInt8(ascii: "}") { position += 1; return }
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\"") else { throw fail(.syntax) }
                let keyOffset = position
                let start = position + 1
                let end = plainStringEnd(from: start)
                let index: Int
                let short: JSONValue.ShortKey?
                if end < bytes.count && bytes[end] == UInt8(ascii: "\"") {
                    position = end + 1
                    index = -1
                    short = JSONValue.ShortKey(utf8: UnsafeBufferPointer(rebasing: bytes[start..<end]))
                } else {
                    let unescaped = try parseString()
                    index = texts.count
                    texts.append(unescaped)
                    short = JSONValue.ShortKey(unescaped)
                }
                if count < Self.linearKeys {
                    for k in 0..<count {
                        let otherStart = keys[4 * k], otherEnd = keys[4 * k + 1], otherIndex = keys[4 * k + 2]
                        let same: Bool
                        if otherIndex < 0 && index < 0 {
                            let length = end - start
                            if length != otherEnd - otherStart {
                                same = false
                            } else if let short {
                                // Plain keys of up to 8 bytes (every claim name) compare as their packed bytes.
                                same = UInt64(bitPattern: Int64(keys[4 * k + 3])) == short.bits
                            } else {
                                same = memcmp(bytes.baseAddress! + otherStart, bytes.baseAddress! + start, length) == 0
                            }
                        } else {
                            same = text(otherStart, otherEnd, otherIndex) == text(start, end, index)
                        }
                        if same { throw ParseError(kind: .duplicateKey, offset: keyOffset) }
                    }
                    keys[4 * count] = start
                    keys[4 * count + 1] = end
                    keys[4 * count + 2] = index
                    keys[4 * count + 3] = Int(Int64(bitPattern: short?.bits ?? 0))
                } else {
                    if seen == nil {
                        seen = Set((0..<count).map { k in text(keys[4 * k], keys[4 * k + 1], keys[4 * k + 2]) })
                    }
                    if !seen!.insert(text(start, end, index)).inserted {
                        throw ParseError(kind: .duplicateKey, offset: keyOffset)
                    }
                }
                count += 1
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { throw fail(.syntax) }
                position += 1
                skipWhitespace()
                let slot = select(short)
                if slot >= 0 && slot < MemberSlots.count {
                    memoizing = strings != nil && (memoSlots >> slot) & 1 != 0
                    slots.set(slot, try parseValue(depth: depth))
                    memoizing = false
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

        /// `parseValue` without keeping the value: a string is checked by `parseString` only when it is not plain
        /// printable ASCII, a number by `parseNumber`; anything else is parsed whole and dropped.
        mutating func skipValue(depth: Int) throws(ParseError) {
            guard let byte = peek else { throw fail(.syntax) }
            switch byte {
            case UInt8(ascii: "\""):
                let end = plainStringEnd(from: position + 1)
                if end < bytes.count && bytes[end] == UInt8(ascii: "\"") {
                    position = end + 1
                } else {
                    _ = try parseString()
                }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                _ = try parseNumber()
            default:
                _ = try parseValue(depth: depth)
            }
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
            if peek == UInt8(ascii: "-") { position += 1 }
            guard let first = peek else { throw fail(.invalidNumber) }
            if first == UInt8(ascii: "0") {
                position += 1
                if let next = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(next) { throw fail(.invalidNumber) }
            } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(first) {
                _ = digits()
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
                var magnitude: Int64 = 0
                let negative = bytes[start] == UInt8(ascii: "-")
                for index in (negative ? start + 1 : start)..<position {
                    magnitude = magnitude * 10 + Int64(bytes[index] &- UInt8(ascii: "0"))
                }
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

extension StrictJSON {
    /// For the `json` fuzz target, which compares the two parsers: what the token parser's one pass
    /// (`scanObject`, with the payload's claim slots) makes of `bytes` — nil when it refuses them, else each claim of
    /// `TokenClaims.claimNames` it kept, in that order. `parse` must accept exactly the same objects with the same
    /// values.
    @_spi(Fuzzing)
    public static func scannedClaims(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
                                     maxBytes: Int = defaultMaxBytes) -> [JSONValue?]? {
        var slots = MemberSlots()
        do {
            try scanObject(bytes, maxDepth: maxDepth, maxBytes: maxBytes, into: &slots, select: TokenClaims.claimSlot)
        } catch {
            return nil
        }
        return [slots.v0, slots.v1, slots.v2, slots.v3, slots.v4, slots.v5, slots.v6, slots.v7, slots.v8]
    }

    /// The payload claim names `scannedClaims` reports, in its order.
    @_spi(Fuzzing)
    public static var claimNames: [String] { TokenClaims.claimNames }
}
