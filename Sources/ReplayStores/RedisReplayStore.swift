import EventLoop
import Foundation
import Glibc
import JSONLog
import Synchronization

/// `replay.store: redis` — shared by any number of gateway instances (docs/replay.md): one server
/// (`redis://`, `rediss://` over TLS) or a cluster (`redis+cluster://`, `rediss+cluster://`).
///
/// - One non-blocking connection per node per event loop, spoken on that loop (`RedisConnection`: RESP
///   over our own sockets or the OpenSSL `TLSStream`, pipelined, every command answered within `timeout` or
///   the connection is dropped and its commands fail closed; reconnect with backoff; heartbeat `PING`).
/// - Keys: `<prefix>{<g>}<64 hex>` where `<g>` is the first byte of the replay key in hex: 256 groups, each
///   one `{hash tag}`, so a replay key and its group's marker `<prefix>{<g>}since` share a cluster slot.
/// - Consume: one `EVAL` of `consumeScript` — atomically: read the group's marker (the unix ms at which the
///   group's state began; created as "now" when missing), answer "reused" when the token's `iat - clock_skew`
///   is earlier than the marker, else `SET key 1 NX PXAT <exp + clock_skew>`: set = consumed, not set = reused.
///
/// State loss (docs/replay.md): a Redis restarted without persistence, `FLUSHALL`/`FLUSHDB`, a key eviction, or a
/// cluster node that lost its data all delete markers; the next consume in that group recreates the marker
/// as "now" in the same atomic step, so every token minted before the loss is refused. Markers are also
/// created (`SET NX`) whenever a connection comes up, so a new deployment's state begins at the gateway's
/// first connection rather than at the first token. A restart that kept the markers but may have lost recent
/// keys (an RDB snapshot, AOF `everysec`) is caught by the server's `run_id`: when a reconnect finds a
/// different `run_id`, every marker is raised to "now" before any held command reaches that server. A
/// gateway started after such a restart cannot know of it: run Redis with AOF (`appendfsync always`) and
/// `maxmemory-policy noeviction` (docs/replay.md).
///
/// Readiness: a problem unless every loop's executor has all its connections up.
public final class RedisReplayStore: ReplayStore, @unchecked Sendable {
    let endpoint: RedisEndpoint
    /// Resolved addresses of each URL node, in URL order (resolved once, off the loops).
    let nodeAddresses: [[SocketAddress]]
    let keyPrefix: [UInt8]
    let timeout: Double
    let logSink: LogSink
    let connectionSettings: RedisConnectionSettings
    public let counters = ReplayCounters()
    private let closed = Atomic<Bool>(false)

    struct ClientStatus {
        var client: LoopBound<RedisReplayClient>
        var up: Bool
        var lastError: String?
    }
    private let registry = Mutex<[ClientStatus]>([])

    public convenience init(url: String, keyPrefix: String, timeout: Double, logSink: LogSink) throws {
        try self.init(url: url, keyPrefix: keyPrefix, timeout: timeout, logSink: logSink, heartbeatInterval: 2)
    }

    package init(url: String, keyPrefix: String, timeout: Double, logSink: LogSink, heartbeatInterval: Double) throws {
        endpoint = try RedisEndpoint.parse(url)
        // In a cluster the first {…} of a key name picks its slot: a brace in the prefix would split a replay
        // key from its group's marker.
        if endpoint.cluster && (keyPrefix.contains("{") || keyPrefix.contains("}")) {
            throw ReplayStoreError("replay.key_prefix must not contain { or } with a cluster (the gateway adds its own hash tag)")
        }
        var resolved: [[SocketAddress]] = []
        for node in endpoint.nodes {
            let list: [SocketAddress]
            do {
                list = try SocketAddress.resolve(host: node.host, port: node.port)
            } catch {
                throw ReplayStoreError("replay.redis_url: cannot resolve \(node.host): \(error)")
            }
            guard !list.isEmpty else { throw ReplayStoreError("replay.redis_url: no address for \(node.host)") }
            resolved.append(list)
        }
        nodeAddresses = resolved
        var tls: TLSClientContext?
        if endpoint.tls {
            if let caFile = endpoint.caFile, !FileManager.default.isReadableFile(atPath: caFile) {
                throw ReplayStoreError("replay.redis_url: ca_file \(caFile) is not readable")
            }
            do {
                tls = try TLSClientContext(caFile: endpoint.caFile, alpnProtocols: [])
            } catch {
                throw ReplayStoreError("replay.redis_url: TLS: \(error)")
            }
        }
        self.keyPrefix = Array(keyPrefix.utf8)
        self.timeout = timeout
        self.logSink = logSink
        connectionSettings = RedisConnectionSettings(tls: tls, user: endpoint.user, password: endpoint.password,
                                                     db: endpoint.db, timeout: timeout, connectTimeout: max(timeout, 1),
                                                     heartbeatInterval: heartbeatInterval, logSink: logSink)
    }

    public func makeClient(for loop: EventLoop) -> ReplayClient {
        let executor: RedisCommandExecutor & RedisLifecycle
        if endpoint.cluster {
            executor = RedisClusterClient(loop: loop, seeds: Array(zip(endpoint.nodes, nodeAddresses)), settings: connectionSettings)
        } else {
            executor = RedisSingleClient(loop: loop, node: endpoint.nodes[0], addresses: nodeAddresses[0], settings: connectionSettings)
        }
        let client = RedisReplayClient(store: self, loop: loop, executor: executor)
        let bound = LoopBound(client)
        registry.withLock { $0.append(ClientStatus(client: bound, up: false, lastError: nil)) }
        if closed.load(ordering: .relaxed) {
            loop.execute { bound.value.shutdown() }
        } else {
            loop.execute { bound.value.start() }
        }
        return client
    }

    public func readinessProblem() -> String? {
        if closed.load(ordering: .relaxed) { return "redis: closed" }
        return registry.withLock { list -> String? in
            if list.isEmpty { return "redis: no connection yet" }
            let down = list.filter { !$0.up }
            if down.isEmpty { return nil }
            let why = down.compactMap { $0.lastError }.first.map { ": \($0)" } ?? ""
            return "redis: \(down.count) of \(list.count) connections down\(why)"
        }
    }

    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        let list = registry.withLock { list -> [ClientStatus] in
            let all = list
            list.removeAll()
            return all
        }
        for s in list {
            let c = s.client
            c.value.loop.execute { c.value.shutdown() }
        }
    }

    var isClosed: Bool { closed.load(ordering: .relaxed) }

    func setStatus(_ client: RedisReplayClient, up: Bool, error: String?) {
        registry.withLock { list in
            if let i = list.firstIndex(where: { $0.client.value === client }) {
                list[i].up = up
                if let error { list[i].lastError = error } else if up { list[i].lastError = nil }
            }
        }
    }

    // MARK: keys and scripts

    /// `<prefix>{<g>}` for group `g`.
    func groupTag(_ group: UInt8) -> [UInt8] {
        var out = keyPrefix
        out.append(UInt8(ascii: "{"))
        out.append(contentsOf: replayHex([group]).utf8)
        out.append(UInt8(ascii: "}"))
        return out
    }

    func keyName(_ key: [UInt8]) -> [UInt8] { groupTag(key[0]) + Array(replayHex(key).utf8) }
    func markerName(_ group: UInt8) -> [UInt8] { groupTag(group) + Array("since".utf8) }

    /// KEYS: replay key, marker. ARGV: PXAT ms, issuedAt ms (`iat - clock_skew`), now ms.
    /// Returns 1 consumed, 0 reused (key present), 2 reused (minted before the group's state began).
    static let consumeScript = Array("""
        local m = redis.call('GET', KEYS[2])
        if not m then m = ARGV[3]; redis.call('SET', KEYS[2], m) end
        if tonumber(ARGV[2]) < tonumber(m) then return 2 end
        if redis.call('SET', KEYS[1], '1', 'NX', 'PXAT', ARGV[1]) then return 1 end
        return 0
        """.utf8)

    /// KEYS: markers. ARGV: now ms, "1" to raise older markers to now (else only create missing ones).
    /// Returns how many markers it set.
    static let markScript = Array("""
        local n = 0
        for _, k in ipairs(KEYS) do
          local m = redis.call('GET', k)
          if (not m) or (ARGV[2] == '1' and tonumber(m) < tonumber(ARGV[1])) then redis.call('SET', k, ARGV[1]); n = n + 1 end
        end
        return n
        """.utf8)
}

/// Start and stop of an executor's connections (on its loop).
protocol RedisLifecycle: AnyObject {
    var observer: RedisExecutorObserver? { get set }
    func start()
    func shutdown()
}

extension RedisSingleClient: RedisLifecycle {}

/// One loop's replay client over its executor. Everything here runs on `loop`'s thread.
final class RedisReplayClient: ReplayClient, RedisExecutorObserver {
    /// Strong: the store's registry holds its clients until `close()`, which breaks the cycle.
    let store: RedisReplayStore
    let loop: EventLoop
    let executor: RedisCommandExecutor & RedisLifecycle
    private var closed = false
    private var markerTimer: LoopTimer?
    /// A raise of every marker (after a restart) has not yet reached every group: not ready until it has.
    private var raisePending = false { didSet { if raisePending != oldValue { publishStatus() } } }
    private var executorUp = false
    private var executorProblem: String? = "no connection yet"

    init(store: RedisReplayStore, loop: EventLoop, executor: RedisCommandExecutor & RedisLifecycle) {
        self.store = store
        self.loop = loop
        self.executor = executor
        executor.observer = self
    }

    func start() {
        guard !closed else { return }
        if store.isClosed { shutdown(); return }
        executor.start()
    }

    func shutdown() {
        guard !closed else { return }
        closed = true
        if let markerTimer { loop.cancel(markerTimer) }
        executor.shutdown()
        store.setStatus(self, up: false, error: "closed")
    }

    // MARK: ReplayClient

    func consume(key: [UInt8], expiresAt: Double, issuedAt: Double, completion: @escaping (ReplayResult) -> Void) {
        guard !closed else { return complete(completion, .unavailable("closed")) }
        guard key.count == 32, expiresAt.isFinite, expiresAt > 0, !issuedAt.isNaN else {
            return complete(completion, .unavailable("bad key"))
        }
        let pxat = Int(min((expiresAt * 1000).rounded(.up), 9_000_000_000_000_000))
        // Rounded down: a fraction never lifts a token over the marker. -inf (no iat floor) becomes 0.
        let issued = Int(max(min((issuedAt * 1000).rounded(.down), 9_000_000_000_000_000), 0))
        let name = store.keyName(key)
        let args: [[UInt8]] = [Array("EVAL".utf8), RedisReplayStore.consumeScript, [UInt8(ascii: "2")], name,
                               store.markerName(key[0]), Array(String(pxat).utf8), Array(String(issued).utf8),
                               Array(String(Self.nowMillis()).utf8)]
        executor.execute(args, routingKey: name) { [weak self] reply in
            let result: ReplayResult
            switch reply {
            case .value(.integer(1)): result = .consumed
            case .value(.integer(0)), .value(.integer(2)): result = .reused
            case .value(.error(let text)): result = .unavailable("redis: \(text.prefix(200))")
            case .value: result = .unavailable("redis: unexpected reply to EVAL")
            case .failure(let reason): result = .unavailable(reason)
            }
            if let self { self.complete(completion, result) } else { completion(result) }
        }
    }

    static func nowMillis() -> Int { Int((replayWallClock() * 1000).rounded(.down)) }

    // MARK: RedisExecutorObserver

    func redisNodeReady(restarted: Bool) {
        // Create every missing marker (a new or emptied deployment begins now); after a restart raise them all,
        // since a restarted server may have reloaded an old snapshot that still has its markers.
        if restarted {
            store.logSink.warning("replay store restarted (new run_id): tokens minted before now are refused as reused",
                                  [("store", "redis"), ("loop", .int(loop.index))])
        }
        markGroups(raise: restarted)
        armMarkerCheck()
    }

    /// Sets the markers of all 256 groups (one `EVAL` with every marker in single mode; one per group in a
    /// cluster, where a script's keys must share a slot). A raise that did not reach every group (a node or
    /// the cluster down at that moment) is tried again at each marker check until it has.
    private func markGroups(raise: Bool, onLoss: Bool = false) {
        let now = Array(String(Self.nowMillis()).utf8)
        let mode: [UInt8] = raise ? [UInt8(ascii: "1")] : [UInt8(ascii: "0")]
        let batches: [[[UInt8]]] = store.endpoint.cluster
            ? (0...255).map { [store.markerName(UInt8($0))] }
            : [(0...255).map { store.markerName(UInt8($0)) }]
        if raise { raisePending = true }
        var left = batches.count
        var failed = false
        for markers in batches {
            let args = [Array("EVAL".utf8), RedisReplayStore.markScript, Array(String(markers.count).utf8)] + markers + [now, mode]
            executor.execute(args, routingKey: markers[0]) { [weak self] reply in
                guard let self else { return }
                left -= 1
                switch reply {
                case .value(.integer(let n)):
                    if onLoss && n > 0 {
                        self.store.logSink.warning("replay store lost its state (group markers missing): tokens minted before now are refused as reused",
                                                   [("store", "redis"), ("groups", .int(Int(n))), ("loop", .int(self.loop.index))])
                    }
                default:
                    failed = true
                    self.store.logSink.debug("replay store markers not set", [("store", "redis"), ("reply", .string("\(reply)"))])
                }
                if left == 0 && raise && !failed { self.raisePending = false }
            }
        }
    }

    /// Every `heartbeatInterval`, recreate missing markers: a `FLUSHALL` is then noticed within that interval
    /// even in groups that see no traffic, so tokens minted after it pass (the consume script would otherwise
    /// recreate a group's marker only at that group's next consume, refusing tokens minted in between).
    private func armMarkerCheck() {
        guard markerTimer == nil else { return }
        let t = LoopTimer { [weak self] in
            guard let self, !self.closed else { return }
            self.markGroups(raise: self.raisePending, onLoss: true)
            if let t = self.markerTimer { self.loop.schedule(t, at: self.loop.now + .nanoseconds(self.store.connectionSettings.heartbeatInterval)) }
        }
        markerTimer = t
        loop.schedule(t, at: loop.now + .nanoseconds(store.connectionSettings.heartbeatInterval))
    }

    func redisStatusChanged(up: Bool, problem: String?) {
        executorUp = up
        executorProblem = problem
        publishStatus()
    }

    private func publishStatus() {
        guard !closed else { return }
        if executorUp && raisePending {
            store.setStatus(self, up: false, error: "server restarted: raising the state markers")
        } else {
            store.setStatus(self, up: executorUp, error: executorProblem)
        }
    }

    private func complete(_ c: (ReplayResult) -> Void, _ result: ReplayResult) {
        store.counters.record(result)
        c(result)
    }
}
