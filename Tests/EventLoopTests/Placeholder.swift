import Testing
@testable import EventLoop

@Test func placeholderEventLoop() { #expect(Bool(true)) }
