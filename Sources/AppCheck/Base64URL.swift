/// Strict base64url without padding (RFC 4648 §5, as required for JWS by RFC 7515 §2).
///
/// Decoding accepts only the 64 alphabet characters, no `=`, no whitespace, and only the canonical
/// encoding: the unused low bits of the last character must be zero, and a length of 1 mod 4 is invalid.
/// So every byte string has exactly one accepted encoding.
public enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// 0...63 for an alphabet byte, 0xFF otherwise.
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in alphabet.enumerated() {
            table[Int(byte)] = UInt8(value)
        }
        return table
    }()

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
        let count = text.count
        if count % 4 == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count * 3 / 4)
        var buffer: UInt32 = 0
        var bitCount = 0
        for char in text {
            let value = decodeTable[Int(char)]
            if value == 0xFF { return nil }
            buffer = (buffer << 6) | UInt32(value)
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bitCount)))
                buffer &= (1 << UInt32(bitCount)) - 1
            }
        }
        // Leftover bits (2 or 4) belong to no byte; a canonical encoder leaves them zero.
        if buffer != 0 { return nil }
        return out
    }

    /// Decodes the UTF-8 of `text`; see `decode(_:)` for the rules.
    public static func decode(_ text: String) -> [UInt8]? {
        decode(Array(text.utf8))
    }
}
