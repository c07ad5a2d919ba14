/// Redis Cluster key → hash slot (the cluster specification's `HASH_SLOT = CRC16(key) mod 16384`, CRC16-XMODEM,
/// hashing only the first non-empty `{hash tag}` when the key has one).
public enum RedisClusterSlot {
    public static let count = 16384

    /// The slot of `key`.
    public static func slot(of key: [UInt8]) -> Int {
        Int(crc16(hashedPart(of: key)) & 0x3FFF)
    }

    public static func slot(of key: String) -> Int { slot(of: Array(key.utf8)) }

    /// The bytes the slot is computed from: between the first `{` and the next `}` when that is non-empty,
    /// else the whole key.
    static func hashedPart(of key: [UInt8]) -> ArraySlice<UInt8> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        guard let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 else { return key[...] }
        return key[(open + 1)..<close]
    }

    /// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for b in bytes {
            crc ^= UInt16(b) << 8
            for _ in 0..<8 {
                crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
            }
        }
        return crc
    }
}
