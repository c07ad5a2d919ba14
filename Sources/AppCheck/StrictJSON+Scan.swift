import Glibc

/// `StrictJSON.scanObject`: the token parser's one pass over an object, under exactly the rules of `parse`, keeping
/// only the members it is asked for (`AppCheckToken.parse`).
extension StrictJSON {
    /// Up to `MemberSlots.count` member values that `scanObject` keeps, by slot (`v0` is slot 0, …). Separate stored
    /// properties, not a tuple: reading one slot then copies that value alone.
    struct MemberSlots {
        static let count = 10
        var v0: JSONValue?, v1: JSONValue?, v2: JSONValue?, v3: JSONValue?, v4: JSONValue?, v5: JSONValue?
        var v6: JSONValue?, v7: JSONValue?, v8: JSONValue?, v9: JSONValue?

        /// The value in slot `slot` (0 ..< `count`).
        func get(_ slot: Int) -> JSONValue? {
            switch slot {
            case 0: v0
            case 1: v1
            case 2: v2
            case 3: v3
            case 4: v4
            case 5: v5
            case 6: v6
            case 7: v7
            case 8: v8
            default: v9
            }
        }

        /// Takes `value` over (`consuming`): the parsed value moves into its slot, no copy.
        mutating func set(_ slot: Int, _ value: consuming JSONValue) {
            switch slot {
            case 0: v0 = value
            case 1: v1 = value
            case 2: v2 = value
            case 3: v3 = value
            case 4: v4 = value
            case 5: v5 = value
            case 6: v6 = value
            case 7: v7 = value
            case 8: v8 = value
            default: v9 = value
            }
        }
    }

    /// A few strings to hand out again (one thread's, not shared): `scanObject` gives a plain printable-ASCII string
    /// of a chosen member whose bytes equal one of them that String (its storage shared), else a new one that it
    /// remembers, the oldest replaced first. The value is the same either way.
    ///
    /// It keeps a few arrays of strings the same way (a token's `aud`, which repeats from token to token): an array
    /// whose bytes, from `[` to its `]`, are those of one remembered is that array's value. The extent and value of an
    /// array whose members are all strings are a function of its bytes alone (the parser reads nothing past its `]`,
    /// and nothing in it is nested, so no depth bound can judge it otherwise), so the value is again the same either
    /// way. Only such arrays are kept (`rememberArray`): an array holding arrays or objects would also depend on the
    /// depth it is found at.
    final class StringMemo {
        static let capacity = 8
        static let arrayCapacity = 4
        /// Longer arrays are parsed every time and not remembered.
        static let maxArrayBytes = 512
        /// Each remembered string (or array) with a copy of its bytes (owned here), read in place: looking one up
        /// retains nothing but the value it returns.
        private struct Entry<Value> {
            let bytes: UnsafeMutablePointer<UInt8>
            let count: Int
            let value: Value
        }

        /// Up to `capacity` remembered values, the oldest replaced first.
        private struct Ring<Value> {
            let capacity: Int
            var entries: [Entry<Value>] = []
            var next = 0

            /// Keeps `value` with a copy of `bytes` (not empty).
            mutating func remember(_ bytes: UnsafeBufferPointer<UInt8>, _ value: Value) {
                let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: bytes.count)
                copy.initialize(from: bytes.baseAddress!, count: bytes.count)
                let entry = Entry(bytes: copy, count: bytes.count, value: value)
                if entries.count < capacity {
                    entries.append(entry)
                } else {
                    entries[next].bytes.deallocate()
                    entries[next] = entry
                    next = (next + 1) % capacity
                }
            }

            /// The index of the first entry for which `matches(bytes, count)` holds, or -1.
            func firstIndex(where matches: (UnsafeMutablePointer<UInt8>, Int) -> Bool) -> Int {
                entries.withUnsafeBufferPointer { stored -> Int in
                    for i in stored.indices where matches(stored[i].bytes, stored[i].count) { return i }
                    return -1
                }
            }

            func deallocate() {
                for entry in entries { entry.bytes.deallocate() }
            }
        }

        private var strings = Ring<String>(capacity: capacity)
        private var arrays = Ring<JSONValue>(capacity: arrayCapacity)
        private var prefixes = Ring<ObjectPrefix>(capacity: prefixCapacity)

        static let prefixCapacity = 4
        /// Longer object starts are not remembered.
        static let maxPrefixBytes = 1024
        /// At most this many members in a remembered start.
        static let maxPrefixMembers = 8

        /// The start of a top-level object that `Parser.scanObject` remembers (its bytes are the ring entry's): up to
        /// just after the comma that ends its `count`-th member, every one of those members a plain key of at most 8
        /// bytes whose slot is in `memoSlots`. `keys` are the duplicate check's records of those members (four words
        /// each), `values` what their slots got. A token's payload starts so (`iss`, `sub`, `aud` repeat from token
        /// to token; `exp`, `iat` and `jti` do not), so a payload that starts with the same bytes resumes after them.
        ///
        /// The scan of those bytes is a function of the bytes, the depth bound and the slots chosen (a memo serves one
        /// `select`: `TokenClaims.claimSlot` for the parse memo), which `maxDepth` and `memoSlots` pin: resuming
        /// gives every object exactly the verdict and the slots the full scan gives it.
        ///
        /// A class: a look-up hands out one reference, where a struct's arrays were retained and released one by one.
        final class ObjectPrefix {
            let maxDepth: Int
            let memoSlots: Int
            let count: Int
            let keys: [Int]
            let values: [(slot: Int, value: JSONValue)]
            /// The members after the start in the object first scanned with it, nil when there were more than
            /// `Parser.linearKeys` members or their bytes between values were more than `maxTailBytes`.
            let tail: ObjectTail?

            init(maxDepth: Int, memoSlots: Int, count: Int, keys: [Int], values: [(slot: Int, value: JSONValue)],
                 tail: ObjectTail?) {
                (self.maxDepth, self.memoSlots, self.count) = (maxDepth, memoSlots, count)
                (self.keys, self.values, self.tail) = (keys, values, tail)
            }
        }

        /// The members after a remembered object start, as the object first scanned with it had them
        /// (`Parser.scanTail`): each member's bytes from the end of the value before it (the start's end, for the
        /// first) to the start of its own value — comma, whitespace, name, colon, whitespace — and the slot its name
        /// got (-1: none); then the bytes from the last value's end to the object's `}`. A token's payload ends in
        /// claims that change from token to token (`exp`, `iat`, `jti`) under the same names in the same order.
        struct ObjectTail {
            /// The members' bytes between values, one after another, then the closing bytes.
            let bytes: [UInt8]
            /// Per member: where its bytes end in `bytes` (they start where the member before ended), and its slot.
            let members: [(end: Int, slot: Int)]
        }

        /// Longer bytes between a start's later values are not remembered.
        static let maxTailBytes = 256

        init() {}

        deinit {
            strings.deallocate()
            arrays.deallocate()
            prefixes.deallocate()
        }

        /// The longest remembered object start that `input` begins with (scanned under the same depth bound and
        /// slots), and where it ends; nil when none.
        func objectPrefix(in input: UnsafeBufferPointer<UInt8>, maxDepth: Int, memoSlots: Int) -> (prefix: ObjectPrefix, end: Int)? {
            guard let base = input.baseAddress, !prefixes.entries.isEmpty else { return nil }
            return prefixes.entries.withUnsafeBufferPointer { stored -> (ObjectPrefix, Int)? in
                var best = -1
                for i in stored.indices where stored[i].count <= input.count && (best < 0 || stored[i].count > stored[best].count)
                    && stored[i].value.maxDepth == maxDepth && stored[i].value.memoSlots == memoSlots
                    && memcmp(stored[i].bytes, base, stored[i].count) == 0 {
                    best = i
                }
                return best >= 0 ? (stored[best].value, stored[best].count) : nil
            }
        }

        /// Remembers the start `bytes` of an object and the scan's state after it.
        func rememberObjectPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ prefix: ObjectPrefix) {
            guard !bytes.isEmpty, bytes.count <= Self.maxPrefixBytes else { return }
            prefixes.remember(bytes, prefix)
        }

        /// The remembered array whose bytes start `input` at `position`, and where it ends; nil when none does.
        func array(in input: UnsafeBufferPointer<UInt8>, at position: Int) -> (value: JSONValue, end: Int)? {
            guard let base = input.baseAddress, !arrays.entries.isEmpty else { return nil }
            let available = input.count - position
            let found = arrays.firstIndex { $1 <= available && memcmp($0, base + position, $1) == 0 }
            return found >= 0 ? (arrays.entries[found].value, position + arrays.entries[found].count) : nil
        }

        /// Remembers the array `value` parsed from exactly `bytes`, when its members are all strings and it is at
        /// most `maxArrayBytes` long.
        func rememberArray(_ bytes: UnsafeBufferPointer<UInt8>, _ value: JSONValue) {
            guard case .array(let members) = value, !bytes.isEmpty, bytes.count <= Self.maxArrayBytes,
                  members.allSatisfy({ if case .string = $0 { true } else { false } }) else { return }
            arrays.remember(bytes, value)
        }

        /// The String of the plain ASCII `bytes`: a remembered one, or a new one, then remembered.
        func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
            let count = bytes.count
            guard let base = bytes.baseAddress, count > 0 else { return "" }
            let found = strings.firstIndex { $1 == count && memcmp($0, base, count) == 0 }
            if found >= 0 { return strings.entries[found].value }
            let string = String(decoding: bytes, as: UTF8.self)
            strings.remember(bytes, string)
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
        // The first keys' positions for the duplicate check live on the stack (four words a key), then where their values
        // start and end and their slots (three words a key, for a remembered object start's tail).
        let result = withUnsafeTemporaryAllocation(of: Int.self, capacity: 7 * Parser.linearKeys) { keys in
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
}

extension StrictJSON.Parser {
    /// The duplicate check of the scanning parsers (`scanObject`, `scanDPoPClaims`): the member name at `start..<end`
    /// (plain), or `texts[index]` (`index` ≥ 0: it had escapes), is the `count`th of its object; throws `duplicateKey`
    /// at `offset` when an earlier one is the same, else records it. The first `linear` names are kept in `names`
    /// (four words each: start, end, text index, and `packed`, the bytes of a plain name of at most 8) and compared
    /// one by one: plain names of one length by their packed bytes or `memcmp`, any other pair as Strings (a
    /// non-ASCII name may be canonically equivalent to an ASCII one). From there on every name goes into `seen`.
    @inline(__always)
    func recordMemberName(start: Int, end: Int, index: Int, packed: UInt64, count: Int, linear: Int,
                          names: UnsafeMutablePointer<Int>, texts: [String], seen: inout Set<String>?,
                          offset: Int) throws(StrictJSON.ParseError) {
        func text(_ start: Int, _ end: Int, _ index: Int) -> String {
            index >= 0 ? texts[index] : String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        }
        guard count < linear else {
            if seen == nil {
                seen = Set((0..<count).map { k in text(names[4 * k], names[4 * k + 1], names[4 * k + 2]) })
            }
            if seen?.insert(text(start, end, index)).inserted != true {
                throw StrictJSON.ParseError(kind: .duplicateKey, offset: offset)
            }
            return
        }
        for k in 0..<count {
            let otherStart = names[4 * k], otherEnd = names[4 * k + 1], otherIndex = names[4 * k + 2]
            let same: Bool
            if otherIndex < 0 && index < 0 {
                let length = end - start
                if length != otherEnd - otherStart {
                    same = false
                } else if length <= 8 {
                    same = UInt64(bitPattern: Int64(names[4 * k + 3])) == packed
                } else {
                    same = bytes.baseAddress.map { memcmp($0 + otherStart, $0 + start, length) == 0 } ?? true
                }
            } else {
                same = text(otherStart, otherEnd, otherIndex) == text(start, end, index)
            }
            if same { throw StrictJSON.ParseError(kind: .duplicateKey, offset: offset) }
        }
        names[4 * count] = start
        names[4 * count + 1] = end
        names[4 * count + 2] = index
        names[4 * count + 3] = Int(Int64(bitPattern: packed))
    }
}

extension StrictJSON.Parser {
    /// Keys checked for duplicates by a linear scan (a token's objects are smaller); a `Set` after.
    static let linearKeys = 16

    /// The top-level object of `StrictJSON.scanObject` (depth 1, as `parseValue(depth: 0)` gives it), at its `{`.
    /// `keys` has room for `7 * linearKeys` words: the duplicate check's four a key, then (from `4 * linearKeys`) where
    /// each of the first `linearKeys` values starts and ends and its slot, for `rememberPrefix`.
    ///
    /// The keys so far, for the duplicate check, are four words each: start and end in the input; -1 for a plain
    /// printable-ASCII key (no String made), or the index in `texts` of the unescaped String of any other; and a
    /// plain key's bytes packed (`JSONValue.ShortKey.bits`) when it has at most 8, which two such keys of one
    /// length compare instead. Two plain keys are equal exactly when their bytes are (ASCII text has one canonical form); a pair with
    /// another key compares as Strings, as `parseObject` does (a non-ASCII key may be canonically equivalent to
    /// an ASCII one: U+212A KELVIN SIGN and "K").
    mutating func scanObject(into slots: inout StrictJSON.MemberSlots, select: (JSONValue.ShortKey?) -> Int, memoSlots: Int,
                             keys: UnsafeMutablePointer<Int>) throws(StrictJSON.ParseError) {
        let depth = 1
        if depth > maxDepth { throw fail(.tooDeep) }
        var count = 0
        var texts: [String] = []
        var seen: Set<String>? = nil
        // The object's start as the memo remembers it (`StringMemo.ObjectPrefix`): the leading members whose keys are
        // plain, short and chosen for the memo, up to the comma after the last of them. `extending` while every member
        // so far is such a one; `prefixSlots` are the slots they filled, `laterSlots` those the members after filled.
        var extending = strings != nil
        var prefixCount = 0, prefixEnd = 0, restored = 0
        var prefixSlots = 0, laterSlots = 0
        if let strings, let (prefix, end) = strings.objectPrefix(in: bytes, maxDepth: maxDepth, memoSlots: memoSlots) {
            // These bytes were scanned before up to `end`, with this result: resume there.
            for (slot, value) in prefix.values {
                slots.set(slot, value)
                prefixSlots |= 1 << slot
            }
            if let tail = prefix.tail {
                position = end
                if try scanTail(tail, into: &slots, memoSlots: memoSlots) { return }
                // Another tail: scanned member by member from the start's end (the slots it set are set again).
            }
            for i in 0..<(4 * prefix.count) { keys[i] = prefix.keys[i] }
            count = prefix.count
            (prefixCount, prefixEnd, restored) = (count, end, count)
            position = end
        } else {
            position += 1  // {
            skipWhitespace()
            if peek == UInt8(ascii: "}") { position += 1; return }
        }
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
                short = JSONValue.ShortKey(in: bytes, from: start, to: end)
            } else {
                let unescaped = try parseString()
                index = texts.count
                texts.append(unescaped)
                short = JSONValue.ShortKey(unescaped)
            }
            try recordMemberName(start: start, end: end, index: index, packed: short?.bits ?? 0, count: count,
                                 linear: Self.linearKeys, names: keys, texts: texts, seen: &seen, offset: keyOffset)
            count += 1
            skipWhitespace()
            guard peek == UInt8(ascii: ":") else { throw fail(.syntax) }
            position += 1
            skipWhitespace()
            let slot = select(short)
            let chosen = slot >= 0 && slot < StrictJSON.MemberSlots.count
            let valueStart = position
            if chosen {
                memoizing = strings != nil && (memoSlots >> slot) & 1 != 0
                slots.set(slot, try parseValue(depth: depth))
                memoizing = false
            } else {
                try skipValue(depth: depth)
            }
            if count <= Self.linearKeys {
                let record = keys + 4 * Self.linearKeys + 3 * (count - 1)
                (record[0], record[1], record[2]) = (valueStart, position, chosen ? slot : -1)
            }
            let inPrefix = extending && index < 0 && short != nil && chosen && (memoSlots >> slot) & 1 != 0
                && count <= StrictJSON.StringMemo.maxPrefixMembers
            if chosen && !inPrefix { laterSlots |= 1 << slot }
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","):
                position += 1
                if inPrefix {
                    (prefixCount, prefixEnd) = (count, position)
                    prefixSlots |= 1 << slot
                } else {
                    extending = false
                }
            case UInt8(ascii: "}"):
                position += 1
                if let strings, prefixCount > restored, prefixSlots & laterSlots == 0 {
                    rememberPrefix(in: strings, count: prefixCount, end: prefixEnd, slotMask: prefixSlots, slots: slots,
                                   memoSlots: memoSlots, keys: keys, members: count)
                }
                return
            default: throw fail(.syntax)
            }
        }
    }

    /// Remembers the object's start up to `end`: its first `count` members, their key records and slot values; and
    /// the tail after it (`ObjectTail`) from the value records of all `members`, the object's `}` just read.
    private func rememberPrefix(in strings: StrictJSON.StringMemo, count: Int, end: Int, slotMask: Int,
                                slots: StrictJSON.MemberSlots, memoSlots: Int, keys: UnsafeMutablePointer<Int>,
                                members: Int) {
        var values: [(slot: Int, value: JSONValue)] = []
        for slot in 0..<StrictJSON.MemberSlots.count where (slotMask >> slot) & 1 != 0 {
            guard let value = slots.get(slot) else { return }
            values.append((slot, value))
        }
        var tail: StrictJSON.StringMemo.ObjectTail? = nil
        if members <= Self.linearKeys {
            var tailBytes: [UInt8] = []
            var tailMembers: [(end: Int, slot: Int)] = []
            var from = end
            for m in count..<members {
                let record = keys + 4 * Self.linearKeys + 3 * m
                tailBytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[from..<record[0]]))
                tailMembers.append((tailBytes.count, record[2]))
                from = record[1]
            }
            tailBytes.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[from..<position]))
            if tailBytes.count <= StrictJSON.StringMemo.maxTailBytes {
                tail = StrictJSON.StringMemo.ObjectTail(bytes: tailBytes, members: tailMembers)
            }
        }
        let prefix = StrictJSON.StringMemo.ObjectPrefix(
            maxDepth: maxDepth, memoSlots: memoSlots, count: count,
            keys: Array(UnsafeBufferPointer(start: keys, count: 4 * count)), values: values, tail: tail)
        strings.rememberObjectPrefix(UnsafeBufferPointer(rebasing: bytes[0..<end]), prefix)
    }

    /// `parseValue` without keeping the value: a string is checked by `parseString` only when it is not plain
    /// printable ASCII, a number by `parseNumber`; anything else is parsed whole and dropped.
    mutating func skipValue(depth: Int) throws(StrictJSON.ParseError) {
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
}
