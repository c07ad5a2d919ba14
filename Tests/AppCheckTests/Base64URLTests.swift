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
}
