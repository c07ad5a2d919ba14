import CSystemShims
import EventLoop
import ProxyCore
import Synchronization

/// Server-wide counters shared by all loops (touched on accept and close only, never per request).
package final class SharedState: Sendable {
    package let openConnections = Atomic<Int>(0)
    /// Open connections per client address (`max_connections_per_address`).
    package let connectionsPerAddress = ConnectionsPerAddress()
    /// Streams reset by clients, per address and in all (HTTP/2 Rapid Reset across reconnects).
    package let resetBudget = ClientResetBudget(now: CSystemShims_monotonic_ns())
    /// HTTP/2 response bytes buffered in the process, waiting for clients' flow-control windows or sockets
    /// (`gateway_h2_buffered_response_bytes`; bounded by `H2Connection.processBufferLimit`).
    package let h2BufferedResponseBytes = Atomic<Int>(0)
    /// Set once `h2BufferedResponseBytes` passed `H2Connection.trimHighWater`; cleared (and the heap trimmed) when
    /// it is back under `trimLowWater`.
    package let h2BufferedWasHigh = Atomic<Bool>(false)
    /// Request bodies built-in handlers (the issuer) hold in the process (`gateway_builtin_buffered_body_bytes`):
    /// past `BuiltinBodyBudget.limit`, new such requests are answered 503 at once (docs/issuer.md, Limits).
    package let builtinBodyBytes = BufferGauge(limit: BuiltinBodyBudget.limit, trimHighWater: 4 << 20)
    /// The same bytes per client address: each holds at most `BuiltinBodyBudget.perAddress` (issue 39).
    package let builtinBodyShares = BuiltinBodyShares()
    /// Trims the heap after a burst of connections or buffered bytes (`MemoryReclaimer`).
    package let reclaimer = MemoryReclaimer()

    package init() {}
}
