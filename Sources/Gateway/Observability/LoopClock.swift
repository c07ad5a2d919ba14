import Foundation
import Glibc
import JSONLog

/// The loop's one wall clock, in Unix seconds: token checks (`iat`, `exp`, the token cache, key-set staleness) and
/// log timestamps read it, and nothing else on the request path reads the time of day, so a test can move it
/// (`GatewayServer.setWallClock`) instead of sleeping. Monotonic time is `EventLoop.now`.
public struct LoopClock {
    public var source: () -> Double = LoopClock.system

    public init(source: @escaping () -> Double = LoopClock.system) { self.source = source }

    /// `gettimeofday`, without Foundation's `Date` on the request path.
    public static func system() -> Double {
        var tv = timeval()
        gettimeofday(&tv, nil)
        return Double(tv.tv_sec) + Double(tv.tv_usec) / 1e6
    }

    public var now: Double { source() }
    public var date: Date { Date(timeIntervalSince1970: now) }

    private var second = -1
    private var prefix = ""

    /// `now` as RFC 3339 with milliseconds (`2026-11-27T02:05:37.185Z`); the part up to the second is formatted
    /// once per second.
    public mutating func timestamp() -> String {
        let t = now
        let whole = Int(t.rounded(.down))
        if whole != second {
            second = whole
            let full = JSONLine.timestamp(Date(timeIntervalSince1970: Double(whole)))
            prefix = String(full.dropLast(4))  // "…:SS."
        }
        let ms = min(999, max(0, Int((t - Double(whole)) * 1000)))
        return prefix + (ms < 10 ? "00" : ms < 100 ? "0" : "") + String(ms) + "Z"
    }
}
