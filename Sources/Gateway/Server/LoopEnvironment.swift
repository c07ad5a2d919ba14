import ProxyCore
import AppCheck
import CSystemShims
import EventLoop
import GatewayConfig
import JSONLog
import KeySets
import ReplayStores

/// The connections of a loop, as the request path sees them: where a connection reports that it closed or that it
/// now speaks HTTP/2. The `Worker` implements it; each connection is handed it at `init`.
package protocol ConnectionTable: AnyObject {
    func connectionClosed(_ conn: ClientConnection)
    func h2ConnectionClosed(_ conn: H2Connection)
    /// The socket of `conn` continues as an HTTP/2 connection with `initial` bytes already read.
    func handOver(_ conn: ClientConnection, initial: UnsafeRawBufferPointer)
}

/// What one event loop's request path needs, handed whole to `init` and never set afterwards: the loop (monotonic
/// clock, timers), the runtime (limits, routes, policy), the `RequestRecorder` (metrics, access log, request ids, the
/// wall clock), the `LoopBuffers`, the `UpstreamPools`, the HTTP/2 adapter's `H2FlushScheduler`, the process-wide
/// `SharedState`, the built-in handlers and the App Check step (which holds the key sets and the replay client).
/// Connections, exchanges and pools hold this instead of the `Worker`, so none of them reaches listeners or other
/// connections. Touched only on its loop's thread.
///
/// What changes while it serves is state, changed only through its methods: the configuration generation
/// (`apply`), the key sets (`setKeys`, `setTrustedKeys`), the replay client a reload adds (`attachReplayClient`)
/// and draining (`beginDrain`).
package final class LoopEnvironment {
    package let loop: EventLoop
    package let logSink: LogSink
    package private(set) var runtime: Runtime
    package let recorder: RequestRecorder
    package let buffers = LoopBuffers()
    package let h2Flush = H2FlushScheduler()
    /// Process-wide counters (connections, buffered bytes, the built-in body budget, client resets).
    package let shared: SharedState
    /// Requests the gateway answers itself (the issuer's API), matched before routes.
    package let builtins: [BuiltinHandler]
    /// Verifies tokens against this loop's key sets; owns them and the replay client.
    package let appCheck: AppCheckStep
    package private(set) var pools = UpstreamPools()
    /// Set when the server drains: responses say `Connection: close`.
    package private(set) var draining = false

    /// `ownKeys`: the gateway's own issuer's public keys (nil without `issuer:`); `keyProvider`: Firebase's key set's
    /// fetcher (nil with `jwks.url: none`); `replayClient`: this loop's client of the replay store (nil when no route
    /// asks for replay protection).
    package init(loop: EventLoop, runtime: Runtime, logSink: LogSink, shared: SharedState, builtins: [BuiltinHandler] = [],
         ownKeys: JWKSet? = nil, keyProvider: KeyRefetching? = nil, replayClient: ReplayClient? = nil) {
        self.loop = loop
        self.runtime = runtime
        self.logSink = logSink
        self.shared = shared
        self.builtins = builtins
        let recorder = RequestRecorder(loop: loop, logSink: logSink)
        self.recorder = recorder
        appCheck = AppCheckStep(loop: loop, recorder: recorder, logSink: logSink, ownKeys: ownKeys,
                                keyProvider: keyProvider, replayClient: replayClient,
                                cacheCapacity: runtime.settings.appCheck.tokenCacheSize / max(1, runtime.settings.server.threads))
        pools.build(runtime, context: self)
        // One hook, unretained: the environment lives as long as its loop runs, and a checked unowned or strong
        // capture would cost a reference-count round trip on every batch of events (so did `Unretained`'s strong
        // `value` here: `_withUnsafeGuaranteedRef` calls without one).
        let me = Unmanaged.passUnretained(self)
        loop.afterBatch.append { me._withUnsafeGuaranteedRef { $0.afterBatch() } }
    }

    /// The end of every batch of events. One call on the environment: each `me.value.` in the hook itself cost a
    /// retain and a release (two batches per proxied request).
    private func afterBatch() {
        runInputTurns()
        h2Flush.runDue()
        recorder.flushLog()
    }

    /// The wall clock (Unix seconds) of token checks: the recorder's, the one the request path reads.
    package var wallClock: Double { recorder.clock.now }

    /// Client stream resets across connections and loops.
    package var resetBudget: ClientResetBudget { shared.resetBudget }

    /// A new key set for this loop; requests waiting on an unknown `kid` verify again.
    package func setKeys(_ keys: LoopKeys) { appCheck.setKeys(keys) }

    /// A new key set for trusted issuer `index`.
    package func setTrustedKeys(_ keys: LoopKeys, index: Int) { appCheck.setTrustedKeys(keys, index: index) }

    /// The replay store a reload added (the first route asking for replay protection).
    package func attachReplayClient(_ client: ReplayClient) { appCheck.replayClient = client }

    /// Switches to a new configuration generation; requests in flight finish on the old one (`UpstreamPools.apply`).
    package func apply(_ new: Runtime) {
        let old = runtime
        runtime = new
        pools.apply(new, after: old, context: self)
    }

    /// From now on responses say `Connection: close` (the server drains).
    package func beginDrain() { draining = true }

    /// Trims the heap one second after asked (`H2Connection.syncBuffered`): by then the streams' upstream
    /// connections and buffers of the burst are freed too.
    private let trimTimer = LoopTimer { CSystemShims_malloc_trim() }

    package func scheduleMemoryTrim() {
        if !trimTimer.isArmed { loop.schedule(trimTimer, at: loop.now + 1_000_000_000) }
    }

    /// HTTP/1.1 connections whose exchange finished outside their own input loop with a next request waiting
    /// (`ClientConnection.scheduleInputTurn`): each takes it at the end of the batch.
    private var inputTurns: [ClientConnection] = []

    package func scheduleInputTurn(_ connection: ClientConnection) {
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
