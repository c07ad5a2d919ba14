import Testing
@testable import HTTPWire

@Test func placeholderHTTPWire() { #expect(Bool(true)) }
