/// Writes the few DER forms the simulated Android device needs for its KeyDescription (X.690 §10: definite,
/// minimal lengths; minimal two's-complement INTEGERs; BOOLEAN TRUE as 0xFF). Simulator only.
enum DERWriter {
    static func element(_ identifier: [UInt8], _ contents: [UInt8]) -> [UInt8] {
        identifier + length(contents.count) + contents
    }

    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes: [UInt8] = []
        var rest = count
        while rest > 0 { bytes.insert(UInt8(rest & 0xFF), at: 0); rest >>= 8 }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func integer(_ value: Int64, tag: UInt8 = 0x02) -> [UInt8] {
        var bytes = withUnsafeBytes(of: value.bigEndian, Array.init)
        while bytes.count > 1, (bytes[0] == 0x00 && bytes[1] & 0x80 == 0) || (bytes[0] == 0xFF && bytes[1] & 0x80 != 0) {
            bytes.removeFirst()
        }
        return element([tag], bytes)
    }

    static func enumerated(_ value: Int64) -> [UInt8] { integer(value, tag: 0x0A) }
    static func boolean(_ value: Bool) -> [UInt8] { [0x01, 0x01, value ? 0xFF : 0x00] }
    static func octetString(_ bytes: [UInt8]) -> [UInt8] { element([0x04], bytes) }
    static func sequence(_ members: [[UInt8]]) -> [UInt8] { element([0x30], members.flatMap { $0 }) }
    static func set(_ members: [[UInt8]]) -> [UInt8] { element([0x31], members.flatMap { $0 }) }
    static func null() -> [UInt8] { [0x05, 0x00] }

    /// `[number] EXPLICIT inner`, context-specific and constructed, in the high tag form when number >= 31.
    static func explicit(_ number: UInt32, _ inner: [UInt8]) -> [UInt8] {
        guard number >= 31 else { return element([0xA0 | UInt8(number)], inner) }
        var digits: [UInt8] = [UInt8(number & 0x7F)]
        var rest = number >> 7
        while rest > 0 { digits.insert(UInt8(rest & 0x7F) | 0x80, at: 0); rest >>= 7 }
        return element([0xBF] + digits, inner)
    }
}
