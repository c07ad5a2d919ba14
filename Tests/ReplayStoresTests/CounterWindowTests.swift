import Testing
@testable import ReplayStores

/// `CounterWindow`'s arithmetic (docs/issuer.md "State"): every verdict, the shifts at the window's edges (Swift's
/// smart shift giving 0 at 64 and beyond), and d = 64 accepted where d = 65 is refused.
@Suite struct CounterWindowTests {
    struct Case: Sendable, CustomStringConvertible {
        var highest: UInt32, window: UInt64, counter: UInt32
        var verdict: CounterVerdict, newHighest: UInt32, newWindow: UInt64
        var description: String { "highest \(highest) window \(String(window, radix: 2)) counter \(counter)" }
    }

    static let top = UInt64(1) << 63

    static let cases: [Case] = [
        // Right after attestation: 0 is the attestation's own.
        Case(highest: 0, window: 0, counter: 0, verdict: .repeated, newHighest: 0, newWindow: 0),
        Case(highest: 0, window: 0, counter: 1, verdict: .accepted, newHighest: 1, newWindow: 1),
        Case(highest: 0, window: 0, counter: 5, verdict: .accepted, newHighest: 5, newWindow: 1 << 4),
        // Below the highest: marked once, then repeated.
        Case(highest: 5, window: 1 << 4, counter: 4, verdict: .accepted, newHighest: 5, newWindow: 1 << 4 | 1),
        Case(highest: 5, window: 1 << 4 | 1, counter: 4, verdict: .repeated, newHighest: 5, newWindow: 1 << 4 | 1),
        Case(highest: 5, window: 1 << 4, counter: 0, verdict: .repeated, newHighest: 5, newWindow: 1 << 4),
        Case(highest: 5, window: 0, counter: 5, verdict: .repeated, newHighest: 5, newWindow: 0),
        // The window's lower edge: d = 64 is the last bit, d = 65 is out.
        Case(highest: 100, window: 0, counter: 36, verdict: .accepted, newHighest: 100, newWindow: top),
        Case(highest: 100, window: top, counter: 36, verdict: .repeated, newHighest: 100, newWindow: top),
        Case(highest: 100, window: 0, counter: 35, verdict: .belowWindow, newHighest: 100, newWindow: 0),
        Case(highest: 100, window: .max, counter: 0, verdict: .belowWindow, newHighest: 100, newWindow: .max),
        // Shifts: 1, 63, 64, 65 and 2^32-1.
        Case(highest: 100, window: 1, counter: 101, verdict: .accepted, newHighest: 101, newWindow: 0b11),
        Case(highest: 100, window: 1, counter: 163, verdict: .accepted, newHighest: 163, newWindow: top | 1 << 62),
        Case(highest: 100, window: 1, counter: 164, verdict: .accepted, newHighest: 164, newWindow: top),
        Case(highest: 100, window: .max, counter: 165, verdict: .accepted, newHighest: 165, newWindow: 0),
        Case(highest: 0, window: 0, counter: .max, verdict: .accepted, newHighest: .max, newWindow: 0),
        Case(highest: 1, window: .max, counter: .max, verdict: .accepted, newHighest: .max, newWindow: 0),
        Case(highest: .max, window: 0, counter: .max, verdict: .repeated, newHighest: .max, newWindow: 0),
        Case(highest: .max, window: 0, counter: .max - 64, verdict: .accepted, newHighest: .max, newWindow: top),
        Case(highest: .max, window: 0, counter: .max - 65, verdict: .belowWindow, newHighest: .max, newWindow: 0),
    ]

    @Test(arguments: cases) func oneCounter(_ c: Case) {
        var w = CounterWindow(highest: c.highest, window: c.window)
        #expect(w.accept(c.counter) == c.verdict)
        #expect(w == CounterWindow(highest: c.newHighest, window: c.newWindow))
    }

    @Test func everyCounterOfAShuffledRunPassesOnce() {
        var w = CounterWindow()
        let counters = Array(UInt32(1)...UInt32(65)).shuffled()
        for c in counters { #expect(w.accept(c) == .accepted, "\(c)") }
        #expect(w.highest == 65 && w.window == .max, "1…64 below 65 all marked")
        for c in counters { #expect(w.accept(c) == .repeated, "\(c)") }
        #expect(w.accept(0) == .belowWindow, "0 is now 65 below")
    }
}
