/// The App Attest assertion counters accepted for one key (docs/issuer.md "State"): the highest accepted, and a
/// 64-bit window of the ones just below it. Apple's rule is that a counter is never accepted twice; clients such as
/// AppCheckCore sign concurrent assertions whose counters (n+1, n+2) may arrive in either order, so a counter
/// below the highest is still accepted once when it is at most `size` below it and not yet marked.
///
/// Bit k of `window` set means counter `highest - 1 - k` was accepted, so differences d = 1…64 below `highest` are
/// tracked; d > 64 is `belowWindow` (too old to tell apart from a replay). Memory and SQLite run this type; the
/// Redis Lua script does the same arithmetic on a 64-character '0'/'1' string.
public struct CounterWindow: Sendable, Equatable {
    /// How far below the highest a counter is still accepted.
    public static let size: UInt32 = 64

    public var highest: UInt32
    public var window: UInt64

    /// After attestation: highest 0 (the attestation's counter, which counts as accepted), nothing below.
    public init(highest: UInt32 = 0, window: UInt64 = 0) {
        self.highest = highest
        self.window = window
    }

    /// Accepts `c` and records it, or says why not (never `unknownKey`).
    public mutating func accept(_ c: UInt32) -> CounterVerdict {
        if c > highest {
            let shift = c - highest  // 1 … 2^32-1
            // Smart shifts: `<<` by 64 or more yields 0, deliberately — the whole window (and, past 64, the old
            // highest itself) falls out of it.
            window = (window << shift) | (UInt64(1) << (shift - 1))
            highest = c
            return .accepted
        }
        if c == highest { return .repeated }
        let d = highest - c
        guard d <= Self.size else { return .belowWindow }
        let bit = UInt64(1) << (d - 1)
        if window & bit != 0 { return .repeated }
        window |= bit
        return .accepted
    }
}
