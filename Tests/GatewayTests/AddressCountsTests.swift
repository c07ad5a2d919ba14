import EventLoop
@testable import Gateway
@testable import ProxyCore
import Testing

/// `AddressCounts`, the per-address request counts of an upstream pool: the same answers as a plain dictionary
/// whether the addresses fit the inline array or spill into the dictionary.
@Suite struct AddressCountsTests {
    static func key(_ n: Int) -> ConnectionAddressKey {
        ConnectionAddressKey(ipBytes: [10, 0, UInt8(n >> 8), UInt8(n & 0xFF)])
    }

    @Test func countsLikeADictionaryAcrossTheInlineLimit() {
        var counts = AddressCounts()
        var model: [ConnectionAddressKey: Int] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            let k = Self.key(Int.random(in: 0..<(step < 10_000 ? 6 : 40), using: &generator))
            if Bool.random(using: &generator) {
                let expected = model[k, default: 0] >= 3 ? nil : model[k, default: 0] + 1
                #expect(counts.increment(k, limit: 3, exempt: { false }) == expected)
                if let expected { model[k] = expected }
            } else {
                #expect(counts.decrement(k) == model[k, default: 0])
                if let held = model[k] { model[k] = held > 1 ? held - 1 : nil }
            }
            #expect(counts.count(k) == model[k, default: 0])
        }
        for n in 0..<40 { #expect(counts.count(Self.key(n)) == model[Self.key(n), default: 0]) }
    }

    @Test func aRefusalAddsNothingAndAnExemptAddressPassesItsLimit() {
        var counts = AddressCounts()
        let k = Self.key(1)
        #expect(counts.increment(k, limit: 1, exempt: { false }) == 1)
        #expect(counts.increment(k, limit: 1, exempt: { false }) == nil)
        #expect(counts.increment(k, limit: 1, exempt: { true }) == 2)
        #expect(counts.increment(Self.key(2), limit: 0, exempt: { false }) == 1, "0 = no bound")
        #expect(counts.decrement(k) == 2)
        #expect(counts.decrement(k) == 1)
        #expect(counts.decrement(k) == 0)
        #expect(counts.count(k) == 0)
    }
}
