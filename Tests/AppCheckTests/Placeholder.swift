import Testing
@testable import AppCheck

@Test func placeholderAppCheck() { #expect(Bool(true)) }
