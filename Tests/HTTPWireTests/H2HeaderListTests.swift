import CNghttp2
import Testing
@testable import HTTPWire

/// What `H2HeaderList` keeps of the fields added to it: names lower-cased, values OWS-trimmed, and left out a name
/// that is not a token (checked in the same pass that lower-cases it), a value with a control byte, the
/// connection-specific fields and the fields `Connection` names. An empty list allocates nothing, a reused one keeps
/// its storage.
@Suite struct H2HeaderListTests {
    /// The fields as `name: value` strings, in order, as nghttp2 would get them after `:status`.
    static func fields(_ list: H2HeaderList) -> [String] {
        list.withNV(status: 200) { nva in
            nva.dropFirst().map { nv in
                let name = String(decoding: UnsafeBufferPointer(start: nv.name, count: nv.namelen), as: UTF8.self)
                let value = String(decoding: UnsafeBufferPointer(start: nv.value, count: nv.valuelen), as: UTF8.self)
                return "\(name): \(value)"
            }
        }
    }

    @Test func keepsTokensLowerCasedAndDropsTheRest() {
        var list = H2HeaderList()
        list.add("Content-Type", "  text/plain ")
        list.add("Bad Name", "x")              // a space: not a token
        list.add("X-Ok(", "x")                 // a delimiter: not a token
        list.add("X-Ctl", "a\u{01}b")          // a control byte in the value
        list.add("Connection", "close, X-Hop")
        list.add("Keep-Alive", "timeout=5")
        list.add("TE", "trailers")
        list.add("X-Hop", "dropped: named in Connection")
        list.add("X-Request-ID", "r1")
        #expect(Self.fields(list) == ["content-type: text/plain", "x-request-id: r1"])
    }

    /// `addChecked` (fields their parser checked) lower-cases the name and keeps the value as it is, in order with the
    /// fields `add` kept.
    @Test func addCheckedLowerCasesTheNameOnly() {
        var list = H2HeaderList(capacity: 64)
        func checked(_ name: String, _ value: String) {
            var name = name, value = value
            name.withUTF8 { n in value.withUTF8 { v in list.addChecked(UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)) } }
        }
        checked("Content-Type", "application/grpc")
        list.add("X-Added", " by add ")
        checked("grpc-status", "0")
        checked("X-MIXED-Case-Name", "Value, With Case")
        checked("x-empty", "")
        #expect(Self.fields(list) == ["content-type: application/grpc", "x-added: by add", "grpc-status: 0",
                                      "x-mixed-case-name: Value, With Case", "x-empty: "])
    }

    /// A name refused after it was copied leaves nothing behind: the next field starts where it would have.
    @Test func aRefusedNameLeavesNoBytes() {
        var list = H2HeaderList(capacity: 64)
        list.add("A", "1")
        list.add("B\u{7F}", "2")
        list.add("C", "3")
        #expect(Self.fields(list) == ["a: 1", "c: 3"])
    }

    @Test func reuseKeepsNothingOfTheLastList() {
        var list = H2HeaderList(capacity: 64)
        list.add("Connection", "x-a")
        list.add("X-A", "1")
        list.add("X-B", "2")
        list.removeAll(keepingUpTo: 1024)
        #expect(list.isEmpty)
        list.add("X-A", "3")
        #expect(Self.fields(list) == ["x-a: 3"])
    }
}
