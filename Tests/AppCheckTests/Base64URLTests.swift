import Testing
@testable import AppCheck

@Suite struct Base64URLTests {
    @Test func rfc4648Vectors() {
        let vectors = [("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"),
                       ("fooba", "Zm9vYmE"), ("foobar", "Zm9vYmFy")]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
            #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test func roundTripsEveryLengthAndByte() {
        for length in 0..<70 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ length) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Base64URL.decode(Base64URL.encode(all)) == all)
    }

    /// Whole rounds leave in eight-byte stores while room remains: nothing is written past the decoded length, and the
    /// bytes are those of the round trip, for every length around the rounds.
    @Test func neverWritesPastTheDecodedLength() {
        for length in 0..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 53 &+ 7) }
            let text = Array(Base64URL.encode(bytes).utf8)
            let count = Base64URL.decodedCount(text.count)!
            var out = [UInt8](repeating: 0xAA, count: count + 8)
            let written = text.withUnsafeBytes { t in out.withUnsafeMutableBufferPointer { Base64URL.decode(t, into: $0.baseAddress!) } }
            #expect(written == length)
            #expect(Array(out[..<length]) == bytes, "length \(length)")
            #expect(out[length...].allSatisfy { $0 == 0xAA }, "length \(length): written past the end")
        }
    }

    @Test(arguments: ["Zg==", "Zg=", "Zm8=", "Zm9v====", "=", "Zm9v+", "Zm9v/", "Zm 9v", " Zm9v", "Zm9v\n",
                      "Zm9v.", "A", "AAAAA", "Zm9vY", "Zh", "Zm9", "Zm+v", "Zm/v", "Zm9é"])
    func rejectsNonStrictInput(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func rejectsNonCanonicalTrailingBits() {
        // "f" is Zg; Zh..Zv carry the same byte with non-zero unused bits.
        #expect(Base64URL.decode("Zg") == [0x66])
        for last in "hijklmnopqrstuv" {
            #expect(Base64URL.decode("Z" + String(last)) == nil)
        }
        #expect(Base64URL.decode("Zm8") == [0x66, 0x6F])
        #expect(Base64URL.decode("Zm9") == nil)
        #expect(Base64URL.decode("AB") == nil)   // Wycheproof ModifiedUnusedBitsInPayload
        #expect(Base64URL.decode("AA") == [0])
    }

    /// The decoder reads whole 4-character quanta, then the 2- or 3-character tail: a character outside the
    /// alphabet is refused at every position of both.
    @Test func refusesAForeignCharacterAtEveryPosition() {
        for length in 1...13 {
            let encoded = Array(Base64URL.encode((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }).utf8)
            #expect(Base64URL.decode(encoded) != nil)
            for position in encoded.indices {
                for foreign in [UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "/"), 0x00, 0x80, 0xFF] {
                    var bad = encoded
                    bad[position] = foreign
                    #expect(Base64URL.decode(bad) == nil, "length \(length), position \(position), byte \(foreign)")
                }
            }
        }
    }

    /// Every byte value outside the alphabet, at every position of the two-quanta rounds, the single quantum and the
    /// tail, is refused; every alphabet character decodes to its value there.
    @Test func everyByteValueAtEveryPosition() {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        for length in [3, 6, 7, 8, 9, 12] {  // 4, 8, 10, 11, 12, 16 characters
            let encoded = Array(Base64URL.encode((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 91 &+ 5) }).utf8)
            for position in encoded.indices {
                for byte in 0...255 {
                    var changed = encoded
                    changed[position] = UInt8(byte)
                    let decoded = Base64URL.decode(changed)
                    if let value = alphabet.firstIndex(of: UInt8(byte)) {
                        // A full quantum takes any character; the tail's last one only with zero unused bits.
                        if position < encoded.count / 4 * 4 {
                            #expect(decoded != nil && Base64URL.encode(decoded!) == String(decoding: changed, as: UTF8.self))
                        } else if decoded != nil {
                            #expect(Base64URL.encode(decoded!) == String(decoding: changed, as: UTF8.self), "value \(value)")
                        }
                    } else {
                        #expect(decoded == nil, "length \(length), position \(position), byte \(byte)")
                    }
                }
            }
        }
    }

    /// Each byte's value in the alphabet, -1 for every other byte.
    static let referenceValues: [Int] = {
        var values = [Int](repeating: -1, count: 256)
        for (value, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8.enumerated() {
            values[Int(byte)] = value
        }
        return values
    }()

    /// A plain reference decoder for the tests: six bits per character into an accumulator, strict as `Base64URL`
    /// (alphabet only, no length 1 mod 4, the unused bits of the last character zero).
    static func referenceDecode(_ text: [UInt8]) -> [UInt8]? {
        if text.count % 4 == 1 { return nil }
        var out: [UInt8] = [], accumulator = 0, bits = 0
        for byte in text {
            let value = referenceValues[Int(byte)]
            guard value >= 0 else { return nil }
            accumulator = accumulator << 6 | value
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> bits))
                accumulator &= (1 << bits) - 1
            }
        }
        return accumulator == 0 ? out : nil
    }

    /// The decoder's widest rounds (16 characters a round while 14 bytes of room remain), its two-quanta rounds, single
    /// quantum and tail agree with the reference decoder on every length from 0 to 400 characters (every length mod 4,
    /// past an RSA-2048 signature's 342): the text of a round trip, the same text with a
    /// character outside the alphabet at each position, with a last character whose unused bits are set, and a
    /// length 1 mod 4; and nothing is written past the decoded length.
    @Test func agreesWithAReferenceDecoderOnEveryLength() {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> Int {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            return Int(truncatingIfNeeded: seed >> 33)
        }
        func decodeChecked(_ text: [UInt8]) -> [UInt8]? {
            guard let count = Base64URL.decodedCount(text.count) else {
                #expect(Base64URL.decode(text) == nil)
                return nil
            }
            var out = [UInt8](repeating: 0xAA, count: count + 16)
            let written = text.withUnsafeBytes { t in out.withUnsafeMutableBufferPointer { Base64URL.decode(t, into: $0.baseAddress!) } }
            let viaArray = Base64URL.decode(text)
            #expect(viaArray == written.map { Array(out[..<$0]) })
            if written != nil {
                #expect(written == count)
                #expect(out[count...].allSatisfy { $0 == 0xAA }, "\(text.count) characters: written past the end")
            }
            return viaArray
        }
        for length in 0...400 {
            var text = (0..<length).map { _ in alphabet[next() & 63] }
            if length % 4 == 1 {
                #expect(decodeChecked(text) == nil)
                continue
            }
            // Canonical: clear the unused low bits of the last character (2 of them after 3 characters, 4 after 2).
            if length % 4 != 0, let last = text.last {
                let value = Self.referenceValues[Int(last)]
                text[length - 1] = alphabet[value & (length % 4 == 3 ? 0x3C : 0x30)]
            }
            let expected = Self.referenceDecode(text)
            #expect(expected != nil && expected!.count == Base64URL.decodedCount(length))
            #expect(decodeChecked(text) == expected, "\(length) characters")
            #expect(expected.map { Base64URL.encode($0) } == String(decoding: text, as: UTF8.self))
            // Every position up to 100 characters and around a 2048-bit signature's 342; beyond, every seventh and
            // the last 20 (the wide rounds repeat).
            let every = length <= 100 || (336...348).contains(length)
            for position in 0..<length where every || position % 7 == length % 7 || position >= length - 20 {
                var bad = text
                bad[position] = [UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "."), 0x00, 0x7F,
                                 0x80, 0xFF, UInt8(ascii: " ")][next() % 9]
                #expect(decodeChecked(bad) == nil, "\(length) characters, position \(position)")
                var other = text
                other[position] = alphabet[next() & 63]
                #expect(decodeChecked(other) == Self.referenceDecode(other), "\(length) characters, position \(position)")
            }
            if length % 4 != 0 {
                var loose = text
                let value = Self.referenceValues[Int(text[length - 1])]
                loose[length - 1] = alphabet[value | (length % 4 == 3 ? 0x01 : 0x04)]
                #expect(Self.referenceDecode(loose) == nil)
                #expect(decodeChecked(loose) == nil, "\(length) characters: non-canonical last character")
            }
        }
    }
}
