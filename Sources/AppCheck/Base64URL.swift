/// Strict base64url without padding (RFC 4648 §5, as required for JWS by RFC 7515 §2).
///
/// Decoding accepts only the 64 alphabet characters, no `=`, no whitespace, and only the canonical
/// encoding: the unused low bits of the last character must be zero, and a length of 1 mod 4 is invalid.
/// So every byte string has exactly one accepted encoding.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes `bytes` as base64url without padding.
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 4 / 3 + 4)
        var buffer: UInt32 = 0
        var bitCount = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bitCount += 8
            while bitCount >= 6 {
                bitCount -= 6
                out.append(alphabet[Int((buffer >> UInt32(bitCount)) & 0x3F)])
            }
        }
        if bitCount > 0 {
            out.append(alphabet[Int((buffer << UInt32(6 - bitCount)) & 0x3F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes strict, unpadded, canonical base64url; `nil` on any deviation.
    public static func decode<Bytes: Collection>(_ text: Bytes) -> [UInt8]? where Bytes.Element == UInt8 {
        if let result = text.withContiguousStorageIfAvailable({ decode(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        return Array(text).withUnsafeBytes { decode($0) }
    }

    /// Decodes strict, unpadded, canonical base64url from raw bytes; `nil` on any deviation.
    public static func decode(_ text: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let outCount = decodedCount(text.count) else { return nil }
        if outCount == 0 { return [] }
        var valid = true
        let out = [UInt8](unsafeUninitializedCapacity: outCount) { out, initialized in
            if let written = decode(text, into: out.baseAddress!) { initialized = written } else { valid = false; initialized = 0 }
        }
        return valid ? out : nil
    }

    /// How many bytes `count` characters of base64url decode to; nil for a length no encoding has (1 mod 4).
    static func decodedCount(_ count: Int) -> Int? {
        if count % 4 == 1 { return nil }
        return count / 4 * 3 + max(0, count % 4 - 1)
    }

    /// Decodes `text` (strict, unpadded, canonical) into `out`, which has room for `decodedCount(text.count)`
    /// bytes: the number written, or nil on any deviation (then `out` holds garbage).
    static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>) -> Int? {
        if text.count % 4 == 1 { return nil }
        // The decode table is read through one pointer per call: a global read per character would cost a
        // lazy-initialisation check each time.
        return quantumTable.withUnsafeBufferPointer { quantum in
            decodeTable.withUnsafeBufferPointer { table in
                decode(text, into: out, quantum: quantum.baseAddress!, table: table.baseAddress!)
            }
        }
    }

    /// Bit 24 of a `quantumTable` entry: the byte is not in the alphabet (above every 24-bit group, so it survives
    /// the OR of a quantum's four entries).
    private static let invalidBit: UInt32 = 1 << 24

    /// `decodeTable` per position in a quantum: entry `256 * k + byte` is the byte's value shifted to its place in the
    /// 24-bit group of four characters (18, 12, 6, 0 bits up for k = 0...3), or `invalidBit` for a byte outside the
    /// alphabet. A quantum is then four loads and three ORs.
    private static let quantumTable: [UInt32] = {
        var table = [UInt32](repeating: invalidBit, count: 4 * 256)
        for (value, byte) in alphabet.enumerated() {
            for k in 0..<4 { table[256 * k + Int(byte)] = UInt32(value) << UInt32(18 - 6 * k) }
        }
        return table
    }()

    /// 0...63 for an alphabet byte, 0xFF for every other byte value; built from `alphabet`, once.
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(value) }
        return table
    }()

    private static func decode(_ text: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>,
                               quantum: UnsafePointer<UInt32>, table: UnsafePointer<UInt8>) -> Int? {
        let count = text.count
        func value(_ byte: UInt8) -> UInt8 { table[Int(byte)] }
        @inline(__always) func group(_ i: Int) -> UInt32 {
            quantum[Int(text[i])] | quantum[256 + Int(text[i &+ 1])] | quantum[512 + Int(text[i &+ 2])]
                | quantum[768 + Int(text[i &+ 3])]
        }
        var i = 0, o = 0
        // Whole quanta: 4 characters → 3 bytes. An invalid character sets `invalidBit`, which survives the ORs, so one
        // check per round suffices. First four quanta a round (16 characters → 12 bytes, an RS256 signature's 342
        // characters in 21 rounds) for as many rounds as leave room for their stores: the round count is fixed up front,
        // so a round costs one comparison besides its loads, one check and two stores. Each half of a round's bytes
        // goes out in one unaligned eight-byte store (big-endian, so in order); the two bytes past a half are written
        // again by the next half, round or the tail, so a round needs 14 bytes of room.
        let total = count / 4 * 3 + max(0, count % 4 - 1)
        let wideRounds = total >= 14 ? min(count / 16, (total - 14) / 12 + 1) : 0
        let wideEnd = wideRounds &* 16
        while i < wideEnd {
            let a = group(i), b = group(i &+ 4), c = group(i &+ 8), d = group(i &+ 12)
            if (a | b | c | d) & invalidBit != 0 { return nil }
            let first = (UInt64(a) << 40 | UInt64(b) << 16).bigEndian
            let second = (UInt64(c) << 40 | UInt64(d) << 16).bigEndian
            UnsafeMutableRawPointer(out + o).storeBytes(of: first, as: UInt64.self)
            UnsafeMutableRawPointer(out + (o &+ 6)).storeBytes(of: second, as: UInt64.self)
            i &+= 16
            o &+= 12
        }
        // Then two quanta a round while there are: one eight-byte store while eight bytes of room remain, else six
        // single bytes.
        while i + 8 <= count && o + 8 <= total {
            let n = group(i), m = group(i + 4)
            if (n | m) & invalidBit != 0 { return nil }
            let six = (UInt64(n) << 40 | UInt64(m) << 16).bigEndian
            UnsafeMutableRawPointer(out + o).storeBytes(of: six, as: UInt64.self)
            i += 8
            o += 6
        }
        while i + 8 <= count {
            let n = group(i), m = group(i + 4)
            if (n | m) & invalidBit != 0 { return nil }
            out[o] = UInt8(truncatingIfNeeded: n >> 16)
            out[o + 1] = UInt8(truncatingIfNeeded: n >> 8)
            out[o + 2] = UInt8(truncatingIfNeeded: n)
            out[o + 3] = UInt8(truncatingIfNeeded: m >> 16)
            out[o + 4] = UInt8(truncatingIfNeeded: m >> 8)
            out[o + 5] = UInt8(truncatingIfNeeded: m)
            i += 8
            o += 6
        }
        if i + 4 <= count {
            let n = group(i)
            if n & invalidBit != 0 { return nil }
            out[o] = UInt8(truncatingIfNeeded: n >> 16)
            out[o + 1] = UInt8(truncatingIfNeeded: n >> 8)
            out[o + 2] = UInt8(truncatingIfNeeded: n)
            i += 4
            o += 3
        }
        if i < count {
            // 2 characters → 1 byte (4 leftover bits), 3 → 2 bytes (2 leftover bits); a canonical encoder
            // leaves the leftover bits zero.
            let rest = count - i
            let a = value(text[i]), b = value(text[i + 1])
            let c = rest == 3 ? value(text[i + 2]) : 0
            if (a | b | c) & 0xC0 != 0 { return nil }
            if rest == 2 {
                if b & 0x0F != 0 { return nil }
                out[o] = a << 2 | b >> 4
                o += 1
            } else {
                if c & 0x03 != 0 { return nil }
                out[o] = a << 2 | b >> 4
                out[o + 1] = (b & 0x0F) << 4 | c >> 2
                o += 2
            }
        }
        return o
    }

    /// Decodes the UTF-8 of `text`; see `decode(_:)` for the rules.
    public static func decode(_ text: String) -> [UInt8]? {
        decode(Array(text.utf8))
    }
}
