/// `dashboard:` (docs/configuration.md): the verdict's thresholds and where the history survives restarts.
public struct DashboardSettings: Sendable, Equatable {
    /// Fewer requests than this in a window: "not enough traffic". Default 1000; 0 or more.
    public var minRequests: Int = 1000
    /// Verified share at or above this: "ready to enforce". Default 0.99; between 0 and 1.
    public var readyShare: Double = 0.99
    /// Where the history is written every minute and read at start; empty (default) = memory only.
    /// Read at start only.
    public var historyFile: String = ""
    public init() {}
}
