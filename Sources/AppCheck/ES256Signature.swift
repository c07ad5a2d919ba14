/// ECDSA P-256 signatures in JWS form (RFC 7518 §3.4: `r ‖ s`, 32 bytes each) are malleable: if (r, s) verifies,
/// so does (r, n − s). Anything that must recognise "the same signed token" (a one-time record) keys on the
/// low-S form, in which s ≤ n / 2, so both encodings of one signature are one record.
public enum ES256Signature {
    /// The order n of the P-256 group, big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    /// ⌊n / 2⌋, big-endian.
    static let halfOrder: [UInt8] = [
        0x7F, 0xFF, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xDE, 0x73, 0x7D, 0x56, 0xD3, 0x8B, 0xCF, 0x42, 0x79, 0xDC, 0xE5, 0x61, 0x7E, 0x31, 0x92, 0xA8,
    ]

    /// `signature` with s replaced by n − s when s > n / 2; other lengths are returned unchanged (they do not
    /// verify as ES256 anyway).
    public static func lowS(_ signature: [UInt8]) -> [UInt8] {
        guard signature.count == 64 else { return signature }
        let s = Array(signature[32...])
        guard s.lexicographicallyPrecedes(halfOrder) == false, s != halfOrder else { return signature }
        // n − s, byte by byte with borrow (s < n for any signature that verified).
        var out = Array(signature[..<32])
        var difference = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for i in stride(from: 31, through: 0, by: -1) {
            var d = Int(order[i]) - Int(s[i]) - borrow
            borrow = d < 0 ? 1 : 0
            if d < 0 { d += 256 }
            difference[i] = UInt8(d)
        }
        out += difference
        return out
    }

    /// True when s > n / 2 (the high-S twin of a low-S signature).
    public static func isHighS(_ signature: [UInt8]) -> Bool {
        signature.count == 64 && lowS(signature) != signature
    }
}
