import Testing
@testable import AndroidAttestation

/// The DER reader's strictness and bounds, byte by byte.
@Suite struct DERReaderTests {
    /// The kind of the error `body` throws, `nil` when it throws none.
    private func kindOf(_ body: () throws -> Void) -> DERError.Kind? {
        do { try body(); return nil } catch let error as DERError { return error.kind } catch { return nil }
    }

    /// SEQUENCE { INTEGER 5, [704] { SEQUENCE { OCTET STRING 'ab', BOOLEAN TRUE, ENUMERATED 0 } } }
    let sample: [UInt8] = [0x30, 0x13, 0x02, 0x01, 0x05, 0xBF, 0x85, 0x40, 0x0C, 0x30, 0x0A,
                           0x04, 0x02, 0x61, 0x62, 0x01, 0x01, 0xFF, 0x0A, 0x01, 0x00]

    private func walk(_ bytes: [UInt8], limits: DERLimits = .keyDescription) throws(DERError) -> (Int64, Bool) {
        var top = try DERReader(bytes, limits: limits)
        let sequence = try top.next(.sequence)
        try top.expectEnd()
        var fields = try top.children(of: sequence)
        let number = try fields.readInteger()
        let tagged = try fields.next(.explicit(704))
        var inner = try fields.children(of: tagged)
        var rot = try inner.children(of: try inner.next(.sequence))
        _ = try rot.readOctetString()
        let locked = try rot.readBoolean()
        _ = try rot.readInteger(.enumerated)
        try rot.expectEnd()
        try inner.expectEnd()
        try fields.expectEnd()
        return (number, locked)
    }

    @Test func readsNestedHighTagElements() throws {
        let (number, locked) = try walk(sample)
        #expect(number == 5)
        #expect(locked)
    }

    @Test func everyProperPrefixIsTruncatedAndNothingElse() {
        for length in 0..<sample.count {
            #expect(kindOf { _ = try walk(Array(sample.prefix(length))) } == DERError.Kind.truncated)
        }
    }

    @Test func trailingBytesAreRefused() {
        #expect(throws: DERError(.trailingBytes, at: 21)) { _ = try walk(sample + [0x00]) }
    }

    @Test func refusesNonDEREncodings() {
        let cases: [([UInt8], DERError.Kind)] = [
            ([0x30, 0x80, 0x00, 0x00], .indefiniteLength),
            ([0x04, 0x81, 0x05, 1, 2, 3, 4, 5], .nonMinimalEncoding),           // long form for a short length
            ([0x04, 0x82, 0x00, 0x90] + [UInt8](repeating: 0, count: 0x90), .nonMinimalEncoding), // leading zero
            ([0x04, 0x85, 1, 0, 0, 0, 0], .tagTooLarge),                          // five length octets
            ([0x9F, 0x1E, 0x00], .nonMinimalEncoding),                            // high form for tag 30
            ([0x9F, 0x80, 0x20, 0x00], .nonMinimalEncoding),                      // leading 0x80 in the tag number
            ([0x9F, 0x81, 0x81, 0x81, 0x01, 0x00], .tagTooLarge),                 // four tag-number octets
        ]
        for (bytes, kind) in cases {
            #expect(kindOf { var reader = try DERReader(bytes); _ = try reader.next() } == kind, "\(bytes.prefix(6))")
        }
    }

    @Test func integersAndBooleansAreMinimal() {
        let good: [([UInt8], Int64)] = [([0x02, 0x01, 0x00], 0), ([0x02, 0x01, 0x7F], 127), ([0x02, 0x02, 0x00, 0x80], 128),
                                         ([0x02, 0x01, 0xFF], -1), ([0x02, 0x03, 0x03, 0x16, 0xE2], 202_466)]
        for (bytes, value) in good {
            var reader = try? DERReader(bytes)
            #expect((try? reader?.readInteger()) == value)
        }
        let bad: [[UInt8]] = [[0x02, 0x00], [0x02, 0x02, 0x00, 0x7F], [0x02, 0x02, 0xFF, 0x80], [0x02, 0x09] + [UInt8](repeating: 1, count: 9)]
        for bytes in bad {
            #expect(kindOf { var reader = try DERReader(bytes); _ = try reader.readInteger() } == DERError.Kind.invalidInteger)
        }
        for bytes: [UInt8] in [[0x01, 0x01, 0x01], [0x01, 0x02, 0xFF, 0xFF], [0x01, 0x00]] {
            #expect(kindOf { var reader = try DERReader(bytes); _ = try reader.readBoolean() } == DERError.Kind.invalidBoolean)
        }
    }

    @Test func depthAndSizeBounds() {
        // Nine nested SEQUENCEs around a NULL, each walked: elements deeper than 8 are refused (the sample needs 4).
        var nested: [UInt8] = [0x05, 0x00]
        for _ in 0..<9 { nested = [0x30, UInt8(nested.count)] + nested }
        #expect(kindOf {
                var reader = try DERReader(nested)
                while true { reader = try reader.children(of: try reader.next()) }
            } == DERError.Kind.tooDeep)
        // Eight levels pass.
        var eight: [UInt8] = [0x05, 0x00]
        for _ in 0..<7 { eight = [0x30, UInt8(eight.count)] + eight }
        var reader = try? DERReader(eight)
        for _ in 0..<7 {
            guard var current = reader, let element = try? current.next() else { Issue.record("nesting refused"); return }
            reader = try? current.children(of: element)
        }
        #expect(reader != nil)
        // Input over maxBytes, and a declared length over it.
        #expect(throws: DERError(.tooLarge, at: 0)) { _ = try DERReader([UInt8](repeating: 0, count: 16_385)) }
        #expect(kindOf { var r = try DERReader([0x04, 0x83, 0x01, 0x00, 0x00]); _ = try r.next() } == DERError.Kind.tooLarge)
        #expect(kindOf { _ = try walk(sample, limits: DERLimits(maxDepth: 3, maxBytes: 100, maxTagNumber: 1000)) } == DERError.Kind.tooDeep)
        #expect(kindOf { _ = try walk(sample, limits: DERLimits(maxDepth: 8, maxBytes: 100, maxTagNumber: 703)) } == DERError.Kind.tagTooLarge)
    }
}
