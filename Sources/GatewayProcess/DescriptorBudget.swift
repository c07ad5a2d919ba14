import Gateway
import GatewayConfig
import Glibc
import JSONLog

/// How many client connections the process's descriptor limit (`RLIMIT_NOFILE`) can hold.
///
/// Each client connection is one descriptor; the rest of the limit is a reserve for everything else: 16
/// fixed (standard streams, logs, the admin listener and its loop, the key-set fetcher, replay-store
/// sockets or files), 4 per loop (epoll, eventfd, plain and TLS listeners), and a quarter of the limit for
/// upstream connections. `max_connections` above `maxConnections` is lowered to it at start, with one log
/// line, so that the gateway answers `503 overloaded` instead of running into `EMFILE` (see `ListenerGate`
/// for what happens if it runs out anyway).
public struct DescriptorBudget: Sendable, Equatable {
    /// The soft `RLIMIT_NOFILE`.
    public let limit: Int
    /// Descriptors kept for everything but client connections.
    public let reserve: Int
    /// Client connections that fit (at least 1).
    public var maxConnections: Int { max(1, limit - reserve) }

    /// - Parameters:
    ///   - limit: the soft descriptor limit.
    ///   - threads: event loops (`server.threads`, resolved).
    public init(limit: Int, threads: Int) {
        self.limit = limit
        reserve = 16 + 4 * max(1, threads) + limit / 4
    }

    /// Raises the soft `RLIMIT_NOFILE` to the hard limit (as Go's runtime does: the soft limit's usual 1024
    /// is a leftover of `select(2)`, which the gateway does not use), then reads it. An unlimited or
    /// unreadable limit counts as `Int32.max` descriptors.
    public static func raisingSoftLimit(threads: Int) -> DescriptorBudget {
        var rl = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &rl) == 0 else { return DescriptorBudget(limit: Int(Int32.max), threads: threads) }
        if rl.rlim_cur < rl.rlim_max {
            var raised = rl
            raised.rlim_cur = rl.rlim_max
            if setrlimit(resource, &raised) == 0 { rl = raised }
        }
        // RLIM_INFINITY is all ones (Glibc imports it as a negative literal).
        let soft = rl.rlim_cur == rlim_t.max ? Int(Int32.max) : Int(clamping: rl.rlim_cur)
        return DescriptorBudget(limit: soft, threads: threads)
    }

    /// Lowers `settings.server.limits.maxConnections` to `maxConnections` when it is above, with one warning
    /// on `log` saying so (configured, effective, limit and reserve), and then `max_connections_per_address` to
    /// half of that when it is above (a second warning), so one address never takes every slot left.
    public func clamp(_ settings: inout Settings, log: LogSink) {
        let configured = settings.server.limits.maxConnections
        guard configured > maxConnections else { return }
        settings.server.limits.maxConnections = maxConnections
        log.warning("max_connections lowered to fit the file descriptor limit", [
            ("configured", .int(configured)), ("effective", .int(maxConnections)),
            ("rlimit_nofile", .int(limit)), ("reserve", .int(reserve)),
        ])
        // One address must not be able to take every slot that is left (issue 25: 600 idle connections from one
        // client under `--nofile=256`): its bound is lowered to half of them too.
        let perAddress = settings.server.limits.maxConnectionsPerAddress
        let half = max(1, maxConnections / 2)
        if perAddress > half {
            settings.server.limits.maxConnectionsPerAddress = half
            log.warning("max_connections_per_address lowered to half of max_connections", [
                ("configured", .int(perAddress)), ("effective", .int(half)),
            ])
        }
    }
}
