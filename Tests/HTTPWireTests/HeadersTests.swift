import Testing
@testable import HTTPWire

@Suite("HTTPHeaders and syntax helpers")
struct HeadersTests {
    private func headers(_ fieldLines: String) throws -> HTTPHeaders {
        try #require(parseRequest("GET / HTTP/1.1\r\nHost: h\r\n" + fieldLines + "\r\n").head).headers
    }

    @Test func valuesAreTrimmedOfOWSButKeepInnerWhitespace() throws {
        let fields = try headers("A: \t x  y \t\r\nB:z\r\n")
        #expect(fields.value(at: 1) == "x  y")
        #expect(fields.value(at: 2) == "z")
        fields.withValueBytes(at: 1) { #expect(Array($0) == Array("x  y".utf8)) }
        fields.withNameBytes(at: 1) { #expect(Array($0) == Array("A".utf8)) }
    }

    @Test func forEachFieldVisitsAllInOrderWithoutStrings() throws {
        let fields = try headers("X-One: 1\r\nX-Two: 2\r\n")
        var seen: [(Int, [UInt8], [UInt8])] = []
        fields.forEachField { index, name, value in seen.append((index, Array(name), Array(value))) }
        #expect(seen.map(\.0) == [0, 1, 2])
        #expect(seen.map(\.1) == [Array("Host".utf8), Array("X-One".utf8), Array("X-Two".utf8)])
        #expect(seen.map(\.2) == [Array("h".utf8), Array("1".utf8), Array("2".utf8)])
    }

    @Test func caseInsensitiveLookups() throws {
        let fields = try headers("CONTENT-type: text/plain\r\nX-A: 1\r\nx-a: 2\r\n")
        #expect(fields.nameEquals(at: 1, "content-type"))
        #expect(!fields.nameEquals(at: 1, "content-typ"))
        #expect(!fields.nameEquals(at: 1, "content-types"))
        #expect(fields.lowercasedName(at: 1) == "content-type")
        #expect(fields.name(at: 1) == "CONTENT-type")
        #expect(fields.firstIndex(forLowercased: "x-a") == 2)
        #expect(fields.indices(forLowercased: "x-a") == [2, 3])
        #expect(fields.contains(lowercased: "host"))
        #expect(!fields.contains(lowercased: "cookie"))
    }

    @Test func listElements() throws {
        let fields = try headers("Via: a , ,b,\t c,\r\n")
        var elements: [String] = []
        fields.forEachListElement(at: 1) { elements.append(String(decoding: $0, as: UTF8.self)); return true }
        #expect(elements == ["a", "b", "c"])
        var first: [String] = []
        fields.forEachListElement(at: 1) { first.append(String(decoding: $0, as: UTF8.self)); return false }
        #expect(first == ["a"])
    }

    @Test func obsTextValuesAreKeptByteExact() throws {
        let input: [UInt8] = Array("GET / HTTP/1.1\r\nHost: h\r\nX: ".utf8) + [0xE9, 0xFF] + Array("\r\n\r\n".utf8)
        let fields = try #require(parseRequest(input).head).headers
        fields.withValueBytes(at: 1) { #expect(Array($0) == [0xE9, 0xFF]) }
    }

    @Test func outOfRangeFieldsAreNeutralisedByTheInitializer() {
        let fields = HTTPHeaders(bytes: Array("ab".utf8), fields: [
            HTTPHeaderField(nameStart: 0, nameEnd: 1, valueStart: 1, valueEnd: 2),
            HTTPHeaderField(nameStart: 0, nameEnd: 9, valueStart: 1, valueEnd: 2),
        ])
        #expect(fields.name(at: 0) == "a")
        #expect(fields.value(at: 0) == "b")
        #expect(fields.name(at: 1) == "")
        #expect(HTTPHeaders().isEmpty)
    }

    /// The eight-bytes-a-step lower-casing is the byte rule for every byte value in every lane, and a long name
    /// compared by words equals exactly the literal's case variants.
    @Test func wordLowercasingIsTheByteRule() {
        for byte in 0...255 {
            for lane in 0..<8 {
                var bytes = [UInt8](repeating: 0x5A, count: 8)  // "Z", lowered to "z" around the byte under test
                bytes[lane] = UInt8(byte)
                let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                let lowered = withUnsafeBytes(of: HTTPSyntax.lowercased(word: word)) { Array($0) }
                #expect(lowered == bytes.map(HTTPSyntax.lowercased), "byte \(byte) in lane \(lane)")
            }
        }
        for name in ["x-firebase-appcheck", "X-Firebase-AppCheck", "X-FIREBASE-APPCHECK", "x-firebase-appchecK"] {
            #expect(Array(name.utf8).withUnsafeBytes { HTTPSyntax.equalsLowercasedByWords($0, "x-firebase-appcheck") })
        }
        for name in ["x-firebase-appchecj", "y-firebase-appcheck", "x-firebase_appcheck", "x-firebase-appcheck ",
                     "x\u{0}firebase-appcheck", "x-firebasE-appcheq"] {
            #expect(!Array(name.utf8).withUnsafeBytes { HTTPSyntax.equalsLowercasedByWords($0, "x-firebase-appcheck") }, "\(name)")
        }
    }

    /// `equalsLowercased` compares names of 8 to 16 bytes as two overlapping words: every byte position, changed to
    /// every byte value, must give the byte-by-byte answer, at each length around the words' bounds.
    @Test func equalsLowercasedAtEveryLength() {
        let literals: [StaticString] = ["keep-al", "keep-ali", "connection", "content-length", "0123456789abcdef",
                                        "0123456789abcdefg"]
        for literal in literals {
            let expected = Array(UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
            let reference = { (bytes: [UInt8]) -> Bool in
                bytes.count == expected.count && zip(bytes, expected).allSatisfy { HTTPSyntax.lowercased($0) == $1 }
            }
            let upper = expected.map { (0x61...0x7A).contains($0) ? $0 - 0x20 : $0 }
            #expect(upper.withUnsafeBytes { HTTPSyntax.equalsLowercased($0, literal) }, "\(literal)")
            #expect(!(expected + [0x61]).withUnsafeBytes { HTTPSyntax.equalsLowercased($0, literal) })
            #expect(!expected.dropLast().withUnsafeBytes { HTTPSyntax.equalsLowercased($0, literal) })
            for position in expected.indices {
                for byte in 0...255 {
                    var bytes = upper
                    bytes[position] = UInt8(byte)
                    #expect(bytes.withUnsafeBytes { HTTPSyntax.equalsLowercased($0, literal) } == reference(bytes),
                            "\(literal): byte \(byte) at \(position)")
                }
            }
        }
    }

    @Test func tokens() {
        #expect(HTTPSyntax.isToken("x-Foo_1.2~!#$%&'*+^`|"))
        #expect(!HTTPSyntax.isToken(""))
        #expect(!HTTPSyntax.isToken("a b"))
        #expect(!HTTPSyntax.isToken("a:b"))
        #expect(!HTTPSyntax.isToken("é"))
        for byte in UInt8(0)...UInt8(255) {
            let expected = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            #expect(HTTPSyntax.isTChar(byte) == expected, "byte \(byte)")
        }
    }

    @Test func hopByHopNames() {
        #expect(Set(HTTPHeaderName.hopByHop) == [
            "connection", "proxy-connection", "keep-alive", "te", "transfer-encoding", "upgrade",
            "proxy-authenticate", "proxy-authorization", "trailer",
        ])
        #expect(HTTPHeaderName.isHopByHop("te"))
        #expect(!HTTPHeaderName.isHopByHop("trailers"))
        Array("Transfer-Encoding".utf8).withUnsafeBytes { #expect(HTTPHeaderName.isHopByHop($0)) }
        Array("X-Forwarded-For".utf8).withUnsafeBytes { #expect(!HTTPHeaderName.isHopByHop($0)) }
    }
}
