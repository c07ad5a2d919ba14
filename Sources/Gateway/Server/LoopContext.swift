import AppCheck
import CSystemShims
import EventLoop
import Foundation
import GatewayConfig
import HTTPWire
import JSONLog
import ReplayStores

/// The connections of a loop, as the request path sees them: where a connection reports that it closed or that it
/// now speaks HTTP/2. The `Worker` implements it.
protocol ConnectionTable: AnyObject {
    func connectionClosed(_ conn: ClientConnection)
    func h2ConnectionClosed(_ conn: H2Connection)
    /// The socket of `conn` continues as an HTTP/2 connection with `initial` bytes already read.
    func handOver(_ conn: ClientConnection, initial: UnsafeRawBufferPointer)
}

/// What one event loop's request path needs, built whole at `init`: the loop (monotonic clock, timers), the runtime
/// (limits, routes, policy), and four parts of their own — the `RequestRecorder` (metrics, access log, request ids,
/// the wall clock), the `LoopBuffers`, the `UpstreamPools` and the HTTP/2 adapter's `H2FlushScheduler` — beside
/// the App Check step with its key sets and replay client and the built-in handlers. Connections, exchanges, pools
/// and the App Check step hold this instead of the `Worker`, so none of them reaches listeners or other
/// connections. Touched only on its loop's thread.
final class LoopContext {
    let loop: EventLoop
    let logSink: LogSink
    private(set) var runtime: Runtime
    let recorder: RequestRecorder
    let buffers = LoopBuffers()
    let h2Flush = H2FlushScheduler()
    private(set) var pools = UpstreamPools()
    /// Created with the context (`init` touches it), lazily only because it holds the context.
    private(set) lazy var appCheck = AppCheckStep(
        context: self, cacheCapacity: runtime.settings.appCheck.tokenCacheSize / max(1, runtime.settings.server.threads))
    /// This loop's view of Firebase's key set; replaced through `setKeys`.
    private(set) var keys: LoopKeys?
    var keyProvider: KeyRefetching?
    /// The gateway's own issuer's public keys (docs/issuer.md), a second key set beside Firebase's; nil without
    /// `issuer:`. Fixed at start.
    var ownKeys: JWKSet?
    /// The key sets of `app_check.trusted_issuers` (another deployment's issuer), in configuration order, each with
    /// the `iss` it vouches for; nil until first fetched. Replaced through `setTrustedKeys`.
    private(set) var trustedKeys: [LoopKeys?] = []
    /// Requests the gateway answers itself (the issuer's API), matched before routes.
    var builtins: [BuiltinHandler] = []
    var replayClient: ReplayClient?
    /// Client stream resets across connections and loops (set by the worker).
    var resetBudget: ClientResetBudget?
    /// Process-wide counters (set by the worker).
    var shared: SharedState?
    /// Set when the server drains: responses say `Connection: close`.
    var draining = false
    /// Where connections report closing (the worker, which owns this context and outlives its connections).
    private weak var connectionTable: ConnectionTable?
    var connections: ConnectionTable {
        guard let connectionTable else { preconditionFailure("LoopContext: its worker is gone") }
        return connectionTable
    }

    init(loop: EventLoop, runtime: Runtime, logSink: LogSink, connections: ConnectionTable) {
        self.loop = loop
        self.runtime = runtime
        self.logSink = logSink
        recorder = RequestRecorder(loop: loop, logSink: logSink)
        connectionTable = connections
        pools.build(runtime, context: self)
        _ = appCheck
        // One hook, and `Unretained`: the context lives as long as its loop runs, and a checked unowned or strong
        // capture would cost a reference-count round trip on every batch of events.
        let me = Unretained(self)
        loop.afterBatch.append { me.value.afterBatch() }
    }

    /// The end of every batch of events. One call on the context: each `me.value.` in the hook itself cost a retain and
    /// a release (two batches per proxied request).
    private func afterBatch() {
        runInputTurns()
        h2Flush.runDue()
        recorder.flushLog()
    }

    /// The wall clock (Unix seconds) of token checks: the recorder's, the one the request path reads.
    var wallClock: Double { recorder.clock.now }

    /// A new key set for this loop; requests waiting on an unknown `kid` verify again.
    func setKeys(_ keys: LoopKeys) {
        self.keys = keys
        appCheck.keysChanged()
    }

    /// A new key set for trusted issuer `index`.
    func setTrustedKeys(_ keys: LoopKeys, index: Int) {
        if trustedKeys.count <= index { trustedKeys += Array(repeating: nil, count: index + 1 - trustedKeys.count) }
        trustedKeys[index] = keys
    }

    /// Switches to a new configuration generation; requests in flight finish on the old one (`UpstreamPools.apply`).
    func apply(_ new: Runtime) {
        let old = runtime
        runtime = new
        pools.apply(new, after: old, context: self)
    }

    /// Trims the heap one second after asked (`H2Connection.syncBuffered`): by then the streams' upstream
    /// connections and buffers of the burst are freed too.
    private let trimTimer = LoopTimer { CSystemShims_malloc_trim() }

    func scheduleMemoryTrim() {
        if !trimTimer.isArmed { loop.schedule(trimTimer, at: loop.now + 1_000_000_000) }
    }

    /// HTTP/1.1 connections whose exchange finished outside their own input loop with a next request waiting
    /// (`ClientConnection.scheduleInputTurn`): each takes it at the end of the batch.
    private var inputTurns: [ClientConnection] = []

    func scheduleInputTurn(_ connection: ClientConnection) {
        inputTurns.append(connection)
    }

    /// Runs after every batch of events: the common case (nothing queued) is one check.
    @inline(__always)
    private func runInputTurns() {
        if inputTurns.isEmpty { return }
        while !inputTurns.isEmpty {
            let due = inputTurns
            inputTurns.removeAll(keepingCapacity: true)
            for connection in due { connection.inputTurnDue() }
        }
    }

}
