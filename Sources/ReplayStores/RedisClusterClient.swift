import EventLoop

/// `RedisCommandExecutor` for Redis Cluster / Valkey cluster (`redis+cluster://`, `rediss+cluster://`), one
/// per event loop.
///
/// - Slot map: `CLUSTER SLOTS` through any ready connection (the URL's seed nodes first), at start, after
///   every `MOVED`, when a node connection goes down, and every `refreshInterval`. Only one refresh is in
///   flight at a time. Nodes must be announced as IP addresses (the default; no DNS on the loop); with TLS
///   each node's certificate must name the address it is announced with.
/// - One connection per master (`RedisConnection`: AUTH, TLS, timeouts and reconnects as in single mode);
///   connections to nodes that left the map are closed.
/// - Routing: the key's hash slot (`RedisClusterSlot`, `{hash tag}` aware) picks the master. `MOVED slot
///   host:port` updates that slot, asks for a refresh and retries at the named node; `ASK slot host:port`
///   sends `ASKING` then the command to the named node, once, without changing the map. At most
///   `maxRedirects` redirections per command, then it fails. `TRYAGAIN` (a multi-key command while its slot
///   migrates; it did not run) is retried after 10 ms and 20 ms, then fails. `CLUSTERDOWN` and commands with
///   no answer fail at once (never retried: a command that may have run is not sent twice).
/// - Before the first map has loaded (the seconds after start), commands wait for it, up to `timeout` and at most
///   `maxWaitingForMap` of them; then they fail as if the cluster were down. Nothing is sent before the map is known.
/// - Up (readiness) when the map covers all 16,384 slots and every master connection is ready.
final class RedisClusterClient: RedisCommandExecutor, RedisConnectionOwner, RedisLifecycle {
    static let maxRedirects = 2
    static let maxTryAgains = 2
    static let refreshInterval = 5.0
    /// Commands held while the first slot map loads.
    static let maxWaitingForMap = 10_000

    let loop: EventLoop
    let seeds: [(RedisEndpoint.Node, [SocketAddress])]
    let settings: RedisConnectionSettings
    weak var observer: RedisExecutorObserver?

    /// Master index per slot (-1: no owner known).
    private var slotOwner = [Int16](repeating: -1, count: RedisClusterSlot.count)
    /// Masters of the current map; indices are what `slotOwner` holds.
    private var masters: [RedisEndpoint.Node] = []
    private var connections: [RedisEndpoint.Node: RedisConnection] = [:]
    private var knownRunIDs: [RedisEndpoint.Node: String] = [:]
    private var refreshing = false
    private var mapLoaded = false
    private var closed = false
    private var refreshTimer: LoopTimer?
    private var lastProblem: String?
    /// Commands that arrived before the first map, with their deadlines (loop time), oldest first.
    private var waitingForMap: [(args: [[UInt8]], routingKey: [UInt8], deadline: UInt64, completion: (RedisReply) -> Void)] = []
    private var waitTimer: LoopTimer?

    init(loop: EventLoop, seeds: [(RedisEndpoint.Node, [SocketAddress])], settings: RedisConnectionSettings) {
        self.loop = loop
        self.seeds = seeds
        self.settings = settings
    }

    // MARK: lifecycle

    func start() {
        guard !closed else { return }
        for (node, addresses) in seeds { _ = connection(to: node, addresses: addresses) }
        let t = LoopTimer { [weak self] in self?.periodicRefresh() }
        refreshTimer = t
        loop.schedule(t, at: loop.now + .nanoseconds(Self.refreshInterval))
    }

    func shutdown() {
        guard !closed else { return }
        closed = true
        if let refreshTimer { loop.cancel(refreshTimer) }
        if let waitTimer { loop.cancel(waitTimer) }
        let waiting = waitingForMap
        waitingForMap.removeAll()
        for w in waiting { w.completion(.failure("closed")) }
        let all = connections.values
        connections.removeAll()
        for c in all { c.shutdown() }
    }

    private func periodicRefresh() {
        guard !closed else { return }
        refresh()
        if let t = refreshTimer { loop.schedule(t, at: loop.now + .nanoseconds(Self.refreshInterval)) }
    }

    private func connection(to node: RedisEndpoint.Node, addresses: [SocketAddress]? = nil) -> RedisConnection? {
        if let c = connections[node] { return c }
        guard !closed else { return nil }
        let list: [SocketAddress]
        if let addresses {
            list = addresses
        } else if let a = SocketAddress(ip: node.host, port: node.port) {
            list = [a]
        } else {
            return nil
        }
        let c = RedisConnection(loop: loop, node: node, addresses: list, settings: settings)
        c.owner = self
        connections[node] = c
        c.start()
        return c
    }

    // MARK: commands

    func execute(_ args: [[UInt8]], routingKey: [UInt8], completion: @escaping (RedisReply) -> Void) {
        guard !closed else { return completion(.failure("closed")) }
        if !mapLoaded {
            guard waitingForMap.count < Self.maxWaitingForMap else {
                return completion(.failure("cluster: slot map not loaded"))
            }
            let deadline = loop.now + .nanoseconds(settings.timeout)
            waitingForMap.append((args, routingKey, deadline, completion))
            if waitTimer == nil {
                let t = LoopTimer { [weak self] in self?.expireWaiting() }
                waitTimer = t
                loop.schedule(t, at: deadline)
            }
            refresh()
            return
        }
        let slot = RedisClusterSlot.slot(of: routingKey)
        let owner = Int(slotOwner[slot])
        guard owner >= 0, owner < masters.count, let c = connection(to: masters[owner]) else {
            refresh()
            return completion(.failure(mapLoaded ? "cluster: no node serves slot \(slot)" : "cluster: slot map not loaded"))
        }
        send(args, on: c, slot: slot, asking: false, redirects: 0, tryAgains: 0, completion: completion)
    }

    private func send(_ args: [[UInt8]], on c: RedisConnection, slot: Int, asking: Bool, redirects: Int, tryAgains: Int,
                      completion: @escaping (RedisReply) -> Void) {
        if asking { c.execute([Array("ASKING".utf8)]) { _ in } }
        c.execute(args) { [weak self] reply in
            guard let self else { return completion(reply) }
            if case .value(.error(let text)) = reply, text.hasPrefix("TRYAGAIN"), tryAgains < Self.maxTryAgains {
                // The slot is being migrated and our keys are split for a moment; the command did not run, so it
                // is safe to send again shortly (10 ms, then 20 ms), to the slot's owner then.
                self.retryLater(args, slot: slot, redirects: redirects, tryAgains: tryAgains + 1, completion: completion)
                return
            }
            guard case .value(.error(let text)) = reply, let redirect = Redirect(text) else {
                if case .failure = reply { self.refresh() }
                return completion(reply)
            }
            guard redirects < Self.maxRedirects, !self.closed else {
                return completion(.failure("cluster: too many redirections (\(text.prefix(80)))"))
            }
            if !redirect.ask {
                self.learn(slot: redirect.slot, node: redirect.node)
                self.refresh()
            }
            guard let target = self.connection(to: redirect.node) else {
                return completion(.failure("cluster: cannot reach \(redirect.node)"))
            }
            self.send(args, on: target, slot: slot, asking: redirect.ask, redirects: redirects + 1, tryAgains: tryAgains,
                      completion: completion)
        }
    }

    private func retryLater(_ args: [[UInt8]], slot: Int, redirects: Int, tryAgains: Int,
                            completion: @escaping (RedisReply) -> Void) {
        let timer = LoopTimer { [weak self] in
            guard let self, !self.closed else { return completion(.failure("closed")) }
            let owner = Int(self.slotOwner[slot])
            guard owner >= 0, owner < self.masters.count, let c = self.connection(to: self.masters[owner]) else {
                return completion(.failure("cluster: no node serves slot \(slot)"))
            }
            self.send(args, on: c, slot: slot, asking: false, redirects: redirects, tryAgains: tryAgains, completion: completion)
        }
        loop.schedule(timer, at: loop.now + .nanoseconds(0.005 * Double(1 << tryAgains)))
    }

    /// `MOVED 3999 127.0.0.1:6381` / `ASK 3999 127.0.0.1:6381`.
    struct Redirect {
        var ask: Bool
        var slot: Int
        var node: RedisEndpoint.Node

        init?(_ text: String) {
            let parts = text.split(separator: " ")
            guard parts.count == 3, parts[0] == "MOVED" || parts[0] == "ASK",
                  let slot = Int(parts[1]), slot >= 0, slot < RedisClusterSlot.count,
                  let colon = parts[2].lastIndex(of: ":"), let port = UInt16(parts[2][parts[2].index(after: colon)...]) else {
                return nil
            }
            var host = String(parts[2][..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { return nil }
            ask = parts[0] == "ASK"
            self.slot = slot
            node = RedisEndpoint.Node(host: host, port: port)
        }
    }

    private func learn(slot: Int, node: RedisEndpoint.Node) {
        if let i = masters.firstIndex(of: node) {
            slotOwner[slot] = Int16(i)
        } else if masters.count < Int(Int16.max) {
            masters.append(node)
            slotOwner[slot] = Int16(masters.count - 1)
        }
    }

    // MARK: slot map

    /// Asks any ready connection (masters first, then seeds) for `CLUSTER SLOTS`, unless a refresh is in flight.
    private func refresh() {
        guard !closed, !refreshing else { return }
        let ready = masters.compactMap { connections[$0] }.filter(\.isReady)
            + seeds.compactMap { connections[$0.0] }.filter(\.isReady)
        guard let via = ready.first else { return } // a connection becoming ready refreshes
        refreshing = true
        via.execute([Array("CLUSTER".utf8), Array("SLOTS".utf8)]) { [weak self] reply in
            guard let self else { return }
            self.refreshing = false
            switch reply {
            case .value(.array(let ranges)):
                self.apply(ranges, askedHost: via.node.host)
            case .value(let other):
                self.setProblem("cluster: CLUSTER SLOTS answered \(String(describing: other).prefix(120))")
            case .failure(let reason):
                self.setProblem("cluster: CLUSTER SLOTS failed: \(reason)")
            }
        }
    }

    private func apply(_ ranges: [RESP.Value], askedHost: String) {
        var owner = [Int16](repeating: -1, count: RedisClusterSlot.count)
        var nodes: [RedisEndpoint.Node] = []
        for range in ranges {
            guard case .array(let r) = range, r.count >= 3, case .integer(let start) = r[0], case .integer(let end) = r[1],
                  start >= 0, end >= start, end < RedisClusterSlot.count, case .array(let master) = r[2], master.count >= 2,
                  let ip = master[0].text, case .integer(let port) = master[1], port > 0, port <= 65535 else {
                setProblem("cluster: malformed CLUSTER SLOTS reply")
                return
            }
            // An empty address means "the node you asked".
            let node = RedisEndpoint.Node(host: ip.isEmpty ? askedHost : ip, port: UInt16(port))
            guard SocketAddress(ip: node.host, port: node.port) != nil else {
                setProblem("cluster: node \(node) is not announced as an IP address")
                return
            }
            let index: Int
            if let i = nodes.firstIndex(of: node) { index = i } else { nodes.append(node); index = nodes.count - 1 }
            for s in Int(start)...Int(end) { owner[s] = Int16(index) }
        }
        slotOwner = owner
        masters = nodes
        let first = !mapLoaded
        mapLoaded = true
        let seedNodes = Set(seeds.map(\.0))
        for (node, c) in connections where !nodes.contains(node) && !seedNodes.contains(node) {
            connections[node] = nil
            c.shutdown()
        }
        for node in nodes { _ = connection(to: node) }
        if first { observer?.redisNodeReady(restarted: false) }
        updateStatus()
        if first { releaseWaiting() }
    }

    /// The first map is known: the commands that waited for it go out in arrival order.
    private func releaseWaiting() {
        if let waitTimer { loop.cancel(waitTimer) }
        waitTimer = nil
        let waiting = waitingForMap
        waitingForMap.removeAll()
        for w in waiting { execute(w.args, routingKey: w.routingKey, completion: w.completion) }
    }

    /// Fails the commands whose wait for the first map has run out; re-arms for the next deadline.
    private func expireWaiting() {
        let now = loop.now
        let expired = waitingForMap.prefix { $0.deadline <= now }
        waitingForMap.removeFirst(expired.count)
        let why = "cluster slot map not loaded: " + (seeds.lazy.compactMap { self.connections[$0.0]?.lastError }.first ?? lastProblem ?? "no seed answered yet")
        for w in expired { w.completion(.failure(why)) }
        if let next = waitingForMap.first, let t = waitTimer {
            loop.schedule(t, at: next.deadline)
        } else {
            waitTimer = nil
        }
    }

    // MARK: status

    private func setProblem(_ text: String) {
        lastProblem = text
        settings.logSink.debug("replay store cluster", [("store", "redis"), ("error", .string(text))])
        updateStatus()
    }

    private func updateStatus() {
        guard !closed else { return }
        var problem: String?
        if !mapLoaded {
            // Say why: a seed's connection error (refused, TLS verification, AUTH) or the last CLUSTER SLOTS problem.
            let seedError = seeds.lazy.compactMap { self.connections[$0.0]?.lastError }.first
            problem = "cluster slot map not loaded: " + (seedError ?? lastProblem ?? "no seed answered yet")
        } else if let hole = slotOwner.firstIndex(of: -1) {
            problem = "cluster: slot \(hole) has no master"
        } else if let down = masters.first(where: { connections[$0]?.isReady != true }) {
            problem = "cluster: node \(down) down\(connections[down]?.lastError.map { ": \($0)" } ?? "")"
        }
        observer?.redisStatusChanged(up: problem == nil, problem: problem)
    }

    func redisConnectionReady(_ connection: RedisConnection, runID: String) {
        let previous = knownRunIDs[connection.node]
        knownRunIDs[connection.node] = runID
        refresh()
        // Before the first map the observer's routed commands could not be delivered: it hears at the first map.
        if mapLoaded { observer?.redisNodeReady(restarted: previous != nil && previous != runID) }
        updateStatus()
    }

    func redisConnectionDown(_ connection: RedisConnection, reason: String) {
        guard !closed else { return }
        refresh()
        updateStatus()
    }
}
