import Gateway
import ProxyCore
import CSystemShims
import Dashboard
import EventLoop
import Foundation
import GatewayConfig
import Glibc
import Issuer
import JSONLog
import KeySets
import ReplayStores
import Synchronization

/// The running gateway: one worker (event loop + thread) per `server.threads`, each with its own
/// `SO_REUSEPORT` listener on every listen address, plus the admin listener on the first loop.
public final class GatewayServer: @unchecked Sendable {
    public let logSink: LogSink
    private let shared = SharedState()
    private var loops: [EventLoop] = []
    private var workers: [Worker] = []
    private var adminListener: AdminListener?
    private let exited = DispatchGroup()
    private let state = Mutex<ServerPhase>(.created)
    private let generation = Atomic<Int>(0)
    private let currentSettings: Mutex<Settings>
    /// The replay store, made at start when a route asks for replay protection (or at the first reload that
    /// adds one). Its settings are read once; changing `replay:` needs a restart.
    private let replayStore = Mutex<ReplayStore?>(nil)
    private var keyProvider: KeySetProvider?
    /// Key sets of `app_check.trusted_issuers`, in configuration order.
    private var trustedProviders: [KeySetProvider] = []
    /// The addresses the public listeners are bound to, in config order (port 0 resolved).
    public private(set) var listenAddresses: [SocketAddress] = []
    /// The addresses the TLS listeners are bound to.
    public private(set) var tlsListenAddresses: [SocketAddress] = []
    /// The admin listener's bound address.
    public private(set) var adminAddress: SocketAddress?
    /// The enforcement dashboard (docs/dashboard.md); `dashboard.history_file` is read here, at start only.
    let dashboard: DashboardService
    /// The self-hosted provider (docs/issuer.md), made at start when `issuer:` is configured; its settings are read
    /// once (changing `issuer:` needs a restart).
    private(set) var issuer: IssuerService?
    let issuerMetrics = IssuerMetrics()

    enum ServerPhase { case created, running, draining, stopped }

    public init(settings: Settings, logSink: LogSink = LogSink()) {
        self.logSink = logSink
        currentSettings = Mutex(settings)
        logSink.setLevel(settings.server.logLevel)
        dashboard = DashboardService(historyFile: settings.dashboard.historyFile, log: logSink)
    }

    public var settings: Settings { currentSettings.withLock { $0 } }

    /// Replaces the wall clock every loop's request path reads (token `iat`/`exp`, the token cache, key-set
    /// staleness); returns once every loop uses it. For tests, which move time instead of sleeping.
    func setWallClock(_ source: @escaping @Sendable () -> Double) {
        let done = DispatchGroup()
        for w in workers {
            done.enter()
            w.loop.execute { [w] in
                w.context.recorder.clock.source = source
                done.leave()
            }
        }
        done.wait()
    }

    /// Binds every listener and starts the loops. Throws on a bind failure (nothing keeps running then).
    public func start() throws {
        CSystemShims_ignore_sigpipe()
        let settings = self.settings
        let runtime = try Runtime(settings: settings, generation: 0)
        for warning in settings.warnings { logSink.warning(warning) }
        if let issuerSettings = settings.issuer {
            for warning in issuerSettings.warnings(allowedAppIds: settings.appCheck.appIds) {
                logSink.warning(String(warning.dropFirst("warning: ".count)))
            }
            let service = try IssuerService.start(settings: issuerSettings, projectNumber: settings.appCheck.projectNumber,
                                                  projectId: settings.appCheck.projectId, jwks: settings.appCheck.jwks,
                                                  clockSkew: settings.appCheck.clockSkew, logSink: logSink)
            issuer = service
            dashboard.ownIssuerKids.withLock { $0 = service.keys.published.map(\.kid) }
            let metrics = issuerMetrics
            metricsCollector.addSource { t in metrics.render(&t) }
            dashboard.issuerExchanges.withLock { $0 = { now in metrics.exchanges(at: now) } }
            let risk = service.riskMetrics
            metricsCollector.addSource { t in risk.render(&t) }
            dashboard.issuerRisk.withLock { $0 = { now in risk.dashboard(at: now) } }
            if let refresher = service.riskRefresher { metricsCollector.addSource { t in refresher.render(&t) } }
        }
        let shared = self.shared
        metricsCollector.addSource { t in
            t.family("gateway_h2_buffered_response_bytes", "gauge",
                     "HTTP/2 response bytes held for clients' flow-control windows or sockets (bounded: 64 KiB per stream, 1 MiB per connection, 256 MiB in all).")
            t.sample("gateway_h2_buffered_response_bytes", [], shared.h2BufferedResponseBytes.load(ordering: .relaxed))
            t.family("gateway_builtin_buffered_body_bytes", "gauge",
                     "Request bodies the issuer holds while it reads them (bounded: 32 MiB in all; past it 503).")
            t.sample("gateway_builtin_buffered_body_bytes", [], shared.builtinBodyBytes.current)
            t.family("gateway_buffer_bytes", "gauge",
                     "Bytes the gateway itself holds in buffers, by kind: connection I/O buffers, HTTP/2 response buffers, built-in request bodies. Compare with RSS to tell a leak from allocator fragmentation.")
            t.sample("gateway_buffer_bytes", [("kind", "io")], IOBuffer.heldBytes)
            t.sample("gateway_buffer_bytes", [("kind", "h2_response")], shared.h2BufferedResponseBytes.load(ordering: .relaxed))
            t.sample("gateway_buffer_bytes", [("kind", "builtin_body")], shared.builtinBodyBytes.current)
        }
        // What every loop's environment is handed at its start: the key-set fetcher and the replay store are made
        // first (fetching and serving begin once the loops exist).
        let provider = settings.appCheck.jwks.isNone ? nil : KeySetProvider(settings: settings.appCheck.jwks, log: logSink)
        let store = settings.needsReplayStore ? try makeReplayStore(settings.replay, logSink: logSink) : nil
        let threads = max(1, settings.server.threads)
        for i in 0..<threads {
            let loop = try EventLoop(index: i)
            loops.append(loop)
            let builtins: [BuiltinHandler] = issuer.map { [IssuerHandler(service: $0, metrics: issuerMetrics, loop: loop)] } ?? []
            let worker = Worker(loop: loop, runtime: runtime, shared: shared, logSink: logSink, builtins: builtins,
                                ownKeys: issuer?.keys.keySet, keyProvider: provider,
                                replayClient: store?.makeClient(for: loop))
            workers.append(worker)
        }
        do {
            for hp in settings.server.listen {
                guard var address = try SocketAddress.resolve(host: hp.host, port: hp.port).first else {
                    throw SocketError("resolve \(hp)", errno: 0)
                }
                for (i, worker) in workers.enumerated() {
                    let fd = try Socket.listen(address)
                    if i == 0, let bound = Socket.localAddress(fd) { address = bound }
                    try worker.addListener(fd: fd)
                }
                listenAddresses.append(address)
            }
            if let tls = settings.server.tls {
                let context = try Self.makeTLSContext(tls)
                for w in workers { w.tlsContext = context }
                for hp in tls.listen {
                    guard var address = try SocketAddress.resolve(host: hp.host, port: hp.port).first else {
                        throw SocketError("resolve \(hp)", errno: 0)
                    }
                    for (i, worker) in workers.enumerated() {
                        let fd = try Socket.listen(address)
                        if i == 0, let bound = Socket.localAddress(fd) { address = bound }
                        try worker.addListener(fd: fd, secure: true)
                    }
                    tlsListenAddresses.append(address)
                }
            }
            if let admin = settings.server.adminListen {
                guard let address = try SocketAddress.resolve(host: admin.host, port: admin.port).first else {
                    throw SocketError("resolve \(admin)", errno: 0)
                }
                let fd = try Socket.listen(address, backlog: 128, reusePort: false)
                adminAddress = Socket.localAddress(fd)
                let l = AdminListener(fd: fd, loop: loops[0], state: AdminStatus(server: self))
                try loops[0].register(fd, l, interest: EventLoop.readable)
                adminListener = l
            }
        } catch {
            for w in workers { w.forceClose(); w.beginDrain() }
            adminListener?.close()
            store?.close()
            throw error
        }
        if let store { attachReplayStore(store, settings.replay) }
        if let provider { attachKeySet(provider) }
        attachTrustedIssuers(settings.appCheck)
        if settings.appCheck.jwks.isNone {
            addNoFirebaseReadiness(ownIssuer: issuer != nil, trusted: settings.appCheck.trustedIssuers)
        }
        for loop in loops {
            exited.enter()
            loop.startThread(name: "loop-\(loop.index)") { [exited] in exited.leave() }
        }
        dashboard.start(loops: workers)
        state.withLock { $0 = .running }
        logSink.info("listening", [
            ("listen", .strings(listenAddresses.map(\.description))),
            ("tls_listen", .strings(tlsListenAddresses.map(\.description))),
            ("admin", adminAddress.map { .string($0.description) } ?? .null),
            ("threads", .int(threads)),
        ])
    }

    /// Replaces the configuration for new requests on every loop (SIGHUP). Listener addresses and the
    /// thread count are fixed at start; a change to them is logged and ignored.
    public func reload(_ new: Settings) throws {
        let old = settings
        let runtime = try Runtime(settings: new, generation: generation.add(1, ordering: .relaxed).newValue)
        if new.server.listen != old.server.listen || new.server.adminListen != old.server.adminListen
            || new.server.threads != old.server.threads || new.dashboard.historyFile != old.dashboard.historyFile {
            logSink.warning("listen addresses, admin_listen, threads and dashboard.history_file change only on restart")
        }
        if new.needsReplayStore && replayStore.withLock({ $0 == nil }) {
            let store = try makeReplayStore(new.replay, logSink: logSink)
            for w in workers { w.loop.execute { [w] in w.attachReplayClient(store.makeClient(for: w.loop)) } }
            attachReplayStore(store, new.replay)
        }
        // Certificates are re-read on every reload; connections keep the context they started with.
        var context: TLSServerContext?
        if let tls = new.server.tls { context = try Self.makeTLSContext(tls) }
        currentSettings.withLock { $0 = new }
        logSink.setLevel(new.server.logLevel)
        let newContext = LoopBound(context)
        for w in workers {
            w.loop.execute { [w] in
                w.apply(runtime)
                if let c = newContext.value { w.tlsContext = c }
            }
        }
        logSink.info("configuration reloaded", [("routes", .int(new.routes.count)), ("file", .string(new.sourcePath))])
        for warning in new.warnings { logSink.warning(warning) }
    }

    /// Stops accepting, lets in-flight requests finish for up to `grace` seconds, then closes everything
    /// and stops the loops. Blocks until done.
    public func shutdown(grace: Double? = nil) {
        let proceed = state.withLock { s -> Bool in
            guard s == .running else { return false }
            s = .draining
            return true
        }
        guard proceed else { return }
        let grace = grace ?? settings.server.limits.shutdownGrace
        // Every loop closes its listeners before we say so: from the "draining" line on, connects are refused.
        let closed = DispatchGroup()
        for w in workers {
            closed.enter()
            w.loop.execute { [w] in
                w.beginDrain()
                closed.leave()
            }
        }
        _ = closed.wait(timeout: .now() + 2)
        logSink.info("draining", [("grace_seconds", .double(grace)), ("connections", .int(openConnections))])
        let deadline = Date().addingTimeInterval(grace)
        while openConnections > 0 && Date() < deadline { usleep(10_000) }
        let left = openConnections
        dashboard.stop(loops: workers)
        for w in workers { w.loop.execute { [w] in w.forceClose() } }
        if let admin = adminListener { loops[0].execute { admin.close() } }
        for loop in loops { loop.stop() }
        exited.wait()
        keyProvider?.stop()
        for p in trustedProviders { p.stop() }
        issuer?.stop()
        (issuer?.state as? RedisIssuerState)?.close()
        replayStore.withLock { $0?.close() }
        state.withLock { $0 = .stopped }
        logSink.info("stopped", [("dropped_connections", .int(left))])
    }

    /// ALPN protocols the TLS listeners offer.
    static let alpn = ["h2", "http/1.1"]

    static func makeTLSContext(_ tls: TLSSettings) throws -> TLSServerContext {
        do {
            return try TLSServerContext(certificatePath: tls.certificatePath, privateKeyPath: tls.privateKeyPath,
                                        minimumVersion: tls.minVersion == "1.3" ? .tls13 : .tls12, alpnProtocols: alpn)
        } catch {
            throw SocketError("TLS: \(error.message)", errno: 0)
        }
    }

    /// Starts fetching the key set (on its own thread); each new snapshot is posted into every loop, which
    /// reads it without a lock. Its settings (`app_check.jwks`) are read once, at start.
    private func attachKeySet(_ provider: KeySetProvider) {
        keyProvider = provider
        let loops = workers.map { LoopBound($0) }
        provider.subscribe { snapshot in
            let keys = LoopKeys(set: snapshot.set,
                                usableUntil: snapshot.fetchedAt.timeIntervalSince1970 + snapshot.lifetime + snapshot.maxStale)
            for w in loops { w.value.loop.execute { w.value.setKeys(keys) } }
        }
        provider.start()
        dashboard.keySetStatus.withLock { $0 = { provider.status } }
        addReadinessCheck {
            let status = provider.status
            return status.isReady ? nil : "jwks: " + (status.lastError ?? "no usable key set yet")
        }
        metricsCollector.addSource { t in
            let status = provider.status
            t.family("appcheck_jwks_fetches_total", "counter", "Key-set fetches by result.")
            t.sample("appcheck_jwks_fetches_total", [("result", "success")], status.successfulFetches)
            t.sample("appcheck_jwks_fetches_total", [("result", "error")], status.failedFetches)
            t.family("appcheck_jwks_keys", "gauge", "Usable keys in the current key set.")
            t.sample("appcheck_jwks_keys", [], status.keyCount)
            t.family("appcheck_jwks_age_seconds", "gauge", "Seconds since the current key set was fetched.")
            t.sample("appcheck_jwks_age_seconds", [], status.ageSeconds ?? 0)
        }
    }

    /// Readiness with `app_check.jwks.url: none` (docs/issuer.md, "App Check with no Google service at all"): Firebase's
    /// key set is not in use, so it is neither fetched nor waited for. The gateway is ready when a key set in use can
    /// verify route tokens: the own issuer's is local and always fresh (ready at once); with trusted issuers only,
    /// once one of their sets is usable (one unreachable deployment must not take the others' tokens out of rotation).
    /// Called after `attachTrustedIssuers`, which fills `trustedProviders`.
    private func addNoFirebaseReadiness(ownIssuer: Bool, trusted: [TrustedIssuerSettings]) {
        guard !ownIssuer else { return }
        let providers = trustedProviders
        addReadinessCheck {
            let statuses = providers.map(\.status)
            if statuses.contains(where: \.isReady) { return nil }
            let each = zip(trusted, statuses).map { entry, status in
                "\(entry.iss): \(status.lastError ?? "no usable key set yet")"
            }
            return "trusted_issuers: no key set usable (" + each.joined(separator: "; ") + ")"
        }
    }

    /// One key-set provider per `app_check.trusted_issuers` entry (docs/issuer.md), fetched and refreshed with
    /// `app_check.jwks`'s timings (no cache file). They do not gate readiness: one unreachable deployment must not take
    /// this one out of rotation; its tokens are refused (`unknown_kid`) until its set is fetched.
    private func attachTrustedIssuers(_ appCheck: AppCheckSettings) {
        let loops = workers.map { LoopBound($0) }
        for (index, entry) in appCheck.trustedIssuers.enumerated() {
            var jwks = appCheck.jwks
            jwks.url = entry.jwksURL
            jwks.cacheFile = ""
            let provider = KeySetProvider(settings: jwks, log: logSink)
            trustedProviders.append(provider)
            provider.subscribe { snapshot in
                let keys = LoopKeys(set: snapshot.set,
                                    usableUntil: snapshot.fetchedAt.timeIntervalSince1970 + snapshot.lifetime + snapshot.maxStale)
                for w in loops { w.value.loop.execute { w.value.setTrustedKeys(keys, index: index) } }
            }
            provider.start()
        }
    }

    /// Keeps the replay store whose clients the loops were given, and reports on it (readiness, dashboard, metrics).
    private func attachReplayStore(_ store: ReplayStore, _ settings: ReplaySettings) {
        replayStore.withLock { $0 = store }
        addReadinessCheck { store.readinessProblem().map { "replay_store: \($0)" } }
        dashboard.replayInfo.withLock { $0 = .init(store: settings.store.rawValue, counters: store.counters,
                                                   problem: { store.readinessProblem() }) }
        metricsCollector.addSource { t in
            let c = store.counters
            t.family("appcheck_replay_store_total", "counter", "Replay-store answers: consumed, reused, error.")
            t.sample("appcheck_replay_store_total", [("result", "consumed")], c.consumed)
            t.sample("appcheck_replay_store_total", [("result", "reused")], c.reused)
            t.sample("appcheck_replay_store_total", [("result", "error")], c.errors)
        }
    }

    /// Readiness checks beyond draining (key set loaded, replay store answering): each returns a problem or nil.
    private let readinessChecks = Mutex<[@Sendable () -> String?]>([])
    let metricsCollector = MetricsCollector()

    func addReadinessCheck(_ check: @escaping @Sendable () -> String?) { readinessChecks.withLock { $0.append(check) } }

    /// What keeps `/readyz` from answering 200 (empty when ready).
    public func readinessProblems() -> [String] {
        var problems: [String] = []
        if isDraining { problems.append("draining") }
        for check in readinessChecks.withLock({ $0 }) { if let p = check() { problems.append(p) } }
        return problems
    }

    /// The Prometheus text of all loops' counters plus the extra sources, delivered on a loop thread.
    public func collectMetrics(_ completion: @escaping @Sendable (String) -> Void) {
        metricsCollector.collect(workers: workers, openConnections: openConnections, completion: completion)
    }

    /// `/dashboard.json`, after folding every loop's counts in; delivered on a background queue.
    func dashboardJSON(_ completion: @escaping @Sendable (String) -> Void) {
        dashboard.json(loops: workers, settings: settings, completion: completion)
    }

    /// Client connections open across all loops.
    public var openConnections: Int { shared.openConnections.load(ordering: .relaxed) }

    /// Open connections per client address (`max_connections_per_address`; tests).
    var connectionsPerAddress: ConnectionsPerAddress { shared.connectionsPerAddress }

    var isDraining: Bool { state.withLock { $0 != .running } }

    /// Waits for SIGHUP (reload from `configPath`), SIGTERM or SIGINT (drain and return). Signals must have
    /// been blocked with `GatewayServer.blockSignals()` before `start()` so that no loop thread takes them.
    public func runUntilTerminated(configPath: String, environment: [String: String]) {
        while true {
            let sig = CSystemShims_wait_signal()
            if sig == SIGHUP {
                switch ConfigLoader.load(path: configPath, environment: environment) {
                case .success(let s):
                    do { try reload(s) } catch {
                        logSink.error("reload failed; keeping the running configuration", [("error", .string("\(error)"))])
                    }
                case .failure(let errors):
                    logSink.error("reload refused; keeping the running configuration",
                                  [("errors", .strings(errors.errors.map(\.description)))])
                }
                continue
            }
            logSink.info("signal received", [("signal", .string(sig == SIGTERM ? "SIGTERM" : "SIGINT"))])
            shutdown()
            return
        }
    }

    /// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread it starts later, and ignores
    /// SIGPIPE. Call first thing in `main`.
    public static func blockSignals() { _ = CSystemShims_block_signals() }
}

/// The admin endpoints' view of the server.
final class AdminStatus: AdminState, @unchecked Sendable {
    unowned let server: GatewayServer

    init(server: GatewayServer) { self.server = server }

    func readinessProblems() -> [String] { server.readinessProblems() }

    func metricsText(_ completion: @escaping @Sendable (String) -> Void) {
        server.collectMetrics(completion)
    }

    func dashboardJSON(_ completion: @escaping @Sendable (String) -> Void) {
        server.dashboardJSON(completion)
    }
}
