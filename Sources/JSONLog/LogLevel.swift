/// A log line's level (`server.log_level`, docs/configuration.md); lines below the sink's level are not built
/// at all.
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warning, error
    var rank: Int { switch self { case .debug: 0; case .info: 1; case .warning: 2; case .error: 3 } }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}
