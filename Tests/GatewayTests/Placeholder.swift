import Testing
@testable import Gateway

@Test func placeholderGateway() { #expect(Bool(true)) }
