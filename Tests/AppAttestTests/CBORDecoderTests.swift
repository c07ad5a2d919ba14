import AppAttest
import AppAttestSimulator
import Testing

@Suite struct CBORDecoderTests {
    static let sample: CBORValue = .map(CBORMap([
        (.text("fmt"), .text("apple-appattest")),
        (.text("list"), .array([.unsigned(0), .unsigned(23), .unsigned(24), .unsigned(255), .unsigned(256), .unsigned(65_536),
                                .unsigned(1 << 32), .negative(6), .bytes(Array(repeating: 0xAB, count: 300)), .text("é")])),
        (.int(-2), .bytes([1, 2, 3])), (.int(1), .map(CBORMap([]))),
    ]))

    func kind(_ bytes: [UInt8], limits: CBORLimits = .appAttest) -> CBORError.Kind? {
        do { _ = try CBORDecoder.decode(bytes, limits: limits); return nil } catch let e as CBORError { return e.kind } catch { return nil }
    }

    @Test func roundTripsTheSubset() throws {
        let bytes = CBORWriter.encode(Self.sample)
        #expect(try CBORDecoder.decode(bytes) == Self.sample)
    }

    @Test func everyProperPrefixIsTruncatedAndTheWholeDecodesTheSame() throws {
        let bytes = CBORWriter.encode(Self.sample)
        for end in 0..<bytes.count {
            #expect(kind(Array(bytes[0..<end])) == .truncated, "prefix of \(end) bytes")
        }
        // Growing the input byte by byte reaches the same value as decoding it whole.
        var fed: [UInt8] = []
        var decoded: CBORValue? = nil
        for byte in bytes {
            fed.append(byte)
            if let value = try? CBORDecoder.decode(fed) { decoded = value }
        }
        #expect(decoded == Self.sample)
    }

    @Test func refusesWhatTheSubsetExcludes() {
        #expect(kind([0x5F, 0x41, 0x00, 0xFF]) == .indefiniteLength)
        #expect(kind([0x9F, 0xFF]) == .indefiniteLength)
        #expect(kind([0xBF, 0xFF]) == .indefiniteLength)
        #expect(kind([0xC0, 0x00]) == .unsupportedType, "tag")
        #expect(kind([0xF5]) == .unsupportedType, "true")
        #expect(kind([0xF9, 0x3C, 0x00]) == .unsupportedType, "half float")
        #expect(kind([0x1C]) == .reservedAdditionalInfo)
        #expect(kind([0x18, 0x17]) == .nonMinimalEncoding)
        #expect(kind([0x19, 0x00, 0xFF]) == .nonMinimalEncoding)
        #expect(kind([0x1A, 0x00, 0x00, 0xFF, 0xFF]) == .nonMinimalEncoding)
        #expect(kind([0x1B, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]) == .nonMinimalEncoding)
        #expect(kind([0x58, 0x01, 0x00]) == .nonMinimalEncoding, "length in a wider form")
        #expect(kind([0x62, 0xC3, 0x28]) == .invalidUTF8)
        #expect(kind([0xA1, 0x80, 0x00]) == .unsupportedKey, "array key")
        #expect(kind([0xA1, 0x41, 0x00, 0x00]) == .unsupportedKey, "byte-string key")
        #expect(kind([0xA1, 0x1B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00]) == .unsupportedKey, "key beyond Int64")
        #expect(kind([0xA2, 0x61, 0x61, 0x00, 0x61, 0x61, 0x01]) == .duplicateKey)
        #expect(kind([0xA2, 0x01, 0x00, 0x01, 0x01]) == .duplicateKey)
        #expect(kind([0x00, 0x00]) == .trailingBytes)
        #expect(kind(CBORWriter.encode(Self.sample) + [0xFF]) == .trailingBytes)
    }

    @Test func hugeDeclaredLengthsCostNothing() {
        #expect(kind([0x5B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) == .tooLarge)
        #expect(kind([0x59, 0xFF, 0xFF]) == .truncated, "under the cap but beyond the input")
        #expect(kind([0x9B, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00]) == .tooManyItems)
        #expect(kind([0x99, 0x01, 0x00]) == .truncated, "256 elements declared, none present")
        #expect(kind(Array(repeating: 0, count: 70_000)) == .tooLarge)
    }

    @Test func capsDepthAndItems() {
        let deep = Array(repeating: UInt8(0x81), count: 8) + [0x00]
        #expect(kind(deep) == .tooDeep)
        #expect(kind(Array(repeating: UInt8(0x81), count: 7) + [0x00]) == nil, "depth 8 is allowed")
        #expect(kind(Array(repeating: UInt8(0x81), count: 100_000) + [0x00]) == .tooLarge)
        let many = CBORWriter.encode(.array(Array(repeating: .unsigned(0), count: 600)))
        #expect(kind(many) == .tooManyItems)
        #expect(kind(many, limits: CBORLimits(maxDepth: 2, maxItems: 1000, maxBytes: 4096)) == nil)
    }

    @Test func authenticatorDataLayout() throws {
        let rp = Array(repeating: UInt8(1), count: 32)
        #expect(throws: AuthenticatorDataError.tooShort) { try AuthenticatorData(rp + [0x40, 0, 0, 0], kind: .assertion) }
        #expect(throws: AuthenticatorDataError.extensionsNotMap) { try AuthenticatorData(rp + [0x40, 0, 0, 0, 1, 0x02], kind: .assertion) }
        let withMap = try AuthenticatorData(rp + [0x40, 0, 0, 1, 2] + [0xA0], kind: .assertion)
        #expect(withMap.counter == 0x0102 && withMap.extensions == CBORMap([]))
        #expect(throws: AuthenticatorDataError.trailingBytes) { try AuthenticatorData(rp + [0x40, 0, 0, 0, 1, 0xA0, 0x00], kind: .assertion) }
        let cose = CBORWriter.encode(.map(CBORMap([(.int(1), .unsigned(2))])))
        let attested = rp + [0x40, 0, 0, 0, 0] + Array(repeating: 0, count: 16) + [0, 2, 9, 9] + cose
        let parsed = try AuthenticatorData(attested, kind: .attestation)
        #expect(parsed.credential?.credentialId == [9, 9] && parsed.extensions == nil)
        #expect(throws: AuthenticatorDataError.credentialPublicKeyNotMap) {
            try AuthenticatorData(rp + [0x40, 0, 0, 0, 0] + Array(repeating: 0, count: 16) + [0, 0, 0x01], kind: .attestation)
        }
        #expect(throws: AuthenticatorDataError.credentialIdTooLong) {
            try AuthenticatorData(rp + [0x40, 0, 0, 0, 0] + Array(repeating: 0, count: 16) + [0xFF, 0xFF], kind: .attestation)
        }
        for end in 0..<attested.count {
            #expect(throws: AuthenticatorDataError.self) { try AuthenticatorData(Array(attested[0..<end]), kind: .attestation) }
        }
    }
}
