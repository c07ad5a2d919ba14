import EventLoop
import Foundation
import JSONLog
import Synchronization

/// The issuer's state in Redis (docs/issuer.md "State"): shared by every gateway instance on the same Redis, durable
/// as far as the server is (use AOF or RDB persistence: attested keys must survive restarts). Works with one server
/// (`redis://`, `rediss://`) and with a cluster (`redis+cluster://`): every entity's keys share one `{hash tag}`.
///
/// Layout under `key_prefix` (default `appcheck:issuer:`):
/// - `c:{<challenge hex>}` → `<app_id>\n<expires_at>[\n<address>]`, removed with `GETDEL` (single use, bound to its
///   app); the address is there when the challenge holds one of its address's slots;
/// - `a:{<address hex>}` → a sorted set of the address's outstanding challenges (member the challenge hex, score
///   its `expires_at`), kept by one Lua script per put (drop the expired, count against `maxPerAddress`, add);
/// - `k:{<key id hex>}` → a hash `app`, `pub`, `ctr` (highest accepted counter), `win` (the `CounterWindow` below
///   it as 64 characters '0'/'1', character k+1 for bit k: Lua numbers are doubles and cannot hold 64 bits),
///   `env`, `rcpt`, `at`; one Lua script judges and records an assertion counter, so one counter value never
///   passes twice;
/// - `u:{<digest hex>}` → `<expires_at>`, set by a Lua script only when absent or expired (one-time inputs);
/// - `rc:{<key id hex>}` → the owner of a receipt refresh claim, `SET NX PX` (RedisIssuerState+Receipts.swift).
/// Expiry is decided against the `now` the caller passes, so every instance judges time alike; Redis TTLs only
/// clean up.
///
/// A challenge and its address's set cannot share a hash tag: `takeChallenge` knows only the challenge, so the
/// challenge key is named after it, and the address's set after the address (one slot per address, so its count
/// is one atomic script on a cluster too). A put is therefore two commands — the address script reserves the slot,
/// then `SET` stores the challenge — and a take is `GETDEL` then `ZREM` of the member. The bound itself is always
/// exact (only the script counts and adds); what a failure between the two commands costs is a slot held until that
/// challenge's `expires_at` (its score), never a second use of a challenge. A Redis at `maxmemory` refusing writes
/// (`OOM`) is `storeFull`, not unavailable.
///
/// Commands run on a loop of the store's own (the executor is loop-confined); callers `await` their answer.
public final class RedisIssuerState: IssuerState, @unchecked Sendable {
    private let loop: EventLoop
    private let executor: RedisCommandExecutor & RedisLifecycle
    let prefix: String
    /// This instance's value in refresh claim keys (`claimRefresh`): only its own claims are released.
    let claimOwner = UUID().uuidString
    private let exited = DispatchGroup()

    /// Connects to `url` (as `replay.redis_url`: `redis://`, `rediss://` with `?ca_file=`, `redis+cluster://`);
    /// throws with one readable line when the URL or its TLS settings are wrong. Commands wait at most `timeout`.
    public init(url: String, keyPrefix: String, timeout: Double = 1, logSink: LogSink) throws(IssuerStateError) {
        let endpoint: RedisEndpoint
        do { endpoint = try RedisEndpoint.parse(url) } catch { throw IssuerStateError("issuer.state.redis_url: \(error)") }
        if endpoint.cluster && (keyPrefix.contains("{") || keyPrefix.contains("}")) {
            throw IssuerStateError("issuer.state.key_prefix must not contain { or } with a cluster")
        }
        var resolved: [[SocketAddress]] = []
        for node in endpoint.nodes {
            guard let list = try? SocketAddress.resolve(host: node.host, port: node.port), !list.isEmpty else {
                throw IssuerStateError("issuer.state.redis_url: cannot resolve \(node.host)")
            }
            resolved.append(list)
        }
        var tls: TLSClientContext?
        if endpoint.tls {
            do { tls = try TLSClientContext(caFile: endpoint.caFile, alpnProtocols: []) } catch {
                throw IssuerStateError("issuer.state.redis_url: TLS: \(error)")
            }
        }
        let settings = RedisConnectionSettings(tls: tls, user: endpoint.user, password: endpoint.password, db: endpoint.db,
                                               timeout: timeout, connectTimeout: max(timeout, 1), heartbeatInterval: 2,
                                               logSink: logSink)
        do { loop = try EventLoop(index: 90) } catch { throw IssuerStateError("issuer state loop: \(error)") }
        if endpoint.cluster {
            executor = RedisClusterClient(loop: loop, seeds: Array(zip(endpoint.nodes, resolved)), settings: settings)
        } else {
            executor = RedisSingleClient(loop: loop, node: endpoint.nodes[0], addresses: resolved[0], settings: settings)
        }
        prefix = keyPrefix
        exited.enter()
        loop.startThread(name: "issuer-redis") { [exited] in exited.leave() }
        let executor = LoopBound(executor)
        loop.execute { executor.value.start() }
    }

    /// Stops the store's loop (connections close).
    public func close() {
        let executor = LoopBound(self.executor)
        loop.execute { executor.value.shutdown() }
        loop.stop()
        exited.wait()
    }

    // MARK: IssuerState

    public func putChallenge(_ challenge: [UInt8], appId: String, address: String, now: Double, expiresAt: Double,
                             maxPerAddress: Int) async throws(IssuerStateError) -> ChallengeAdmission {
        let name = key("c", challenge)
        var value = "\(appId)\n\(expiresAt)"
        do throws(IssuerStateError) {
            if maxPerAddress > 0 {
                let set = key("a", Array(address.utf8))
                let reply = try await run(["EVAL", Self.reserveScript, "1", set, Self.hex(challenge), String(now), String(expiresAt),
                                           String(maxPerAddress), ttl(expiresAt, now)], set)
                guard reply == .integer(1) else { return .addressFull }
                value += "\n\(address)"
            }
            let reply = try await run(["SET", name, value, "PX", ttl(expiresAt, now)], name)
            guard case .simple("OK") = reply else { throw IssuerStateError("redis SET: \(reply)") }
            return .stored
        } catch {
            if error.description.hasPrefix("redis: OOM") { return .storeFull }
            throw error
        }
    }

    public func takeChallenge(_ challenge: [UInt8], appId: String, now: Double) async throws(IssuerStateError) -> Bool {
        let reply = try await run(["GETDEL", key("c", challenge)], key("c", challenge))
        guard case .bulk(let bytes) = reply else { return false }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        if parts.count == 3 {
            // Free the address's slot. The challenge is already used up whatever this answers; if it fails, the
            // slot frees itself at the challenge's expiry (the member's score).
            let set = key("a", Array(parts[2].utf8))
            _ = try? await run(["ZREM", set, Self.hex(challenge)], set)
        }
        guard parts.count >= 2, String(parts[0]) == appId, let expiresAt = Double(parts[1]) else { return false }
        return now < expiresAt
    }

    public func insertKey(_ k: AttestedKey) async throws(IssuerStateError) -> Bool {
        let name = key("k", k.keyId)
        let reply = try await runBytes([Array("EVAL".utf8), Array(Self.insertScript.utf8), Array("1".utf8), Array(name.utf8),
                                        Array(k.appId.utf8), k.publicKey, Array(String(k.counter).utf8),
                                        Array(k.environment.utf8), k.receipt, Array(String(k.attestedAt).utf8),
                                        Self.windowText(k.counterWindow), Self.optionalText(k.riskMetric),
                                        Self.optionalText(k.receiptNotBefore), Self.optionalText(k.receiptRefreshAt)], name)
        guard reply == .integer(1) else { return false }
        if let at = k.receiptRefreshAt { try await scheduleRefresh(keyIdHex: Self.hex(k.keyId), at: at) }
        return true
    }

    public func key(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) -> AttestedKey? {
        let name = key("k", keyId)
        let reply = try await run(["HGETALL", name], name)
        guard case .array(let items) = reply, !items.isEmpty, items.count % 2 == 0 else { return nil }
        var fields: [String: [UInt8]] = [:]
        for i in stride(from: 0, to: items.count, by: 2) {
            guard case .bulk(let n) = items[i], case .bulk(let v) = items[i + 1] else { return nil }
            fields[String(decoding: n, as: UTF8.self)] = v
        }
        func text(_ f: String) -> String? { fields[f].map { String(decoding: $0, as: UTF8.self) } }
        guard text("app") == appId, let pub = fields["pub"], let counter = text("ctr").flatMap(UInt32.init),
              let env = text("env"), let receipt = fields["rcpt"], let at = text("at").flatMap(Double.init) else { return nil }
        // A key stored before the window existed has no `win`: nothing accepted below its highest.
        guard let window = fields["win"].map(Self.window(_:)) ?? 0 else { return nil }
        // Keys stored before fraud risk have none of `risk`, `rnb`, `rra`; "" is nil.
        return AttestedKey(keyId: keyId, appId: appId, publicKey: pub, counter: counter, counterWindow: window,
                           environment: env, receipt: receipt, attestedAt: at, riskMetric: text("risk").flatMap(Int.init),
                           receiptNotBefore: text("rnb").flatMap(Double.init), receiptRefreshAt: text("rra").flatMap(Double.init))
    }

    public func acceptCounter(_ keyId: [UInt8], appId: String, counter: UInt32) async throws(IssuerStateError) -> CounterVerdict {
        let name = key("k", keyId)
        let reply = try await run(["EVAL", Self.acceptScript, "1", name, appId, String(counter)], name)
        switch reply {
        case .integer(0): return .accepted
        case .integer(1): return .repeated
        case .integer(2): return .belowWindow
        case .integer(3): return .unknownKey
        default: throw IssuerStateError("redis: unexpected counter reply \(reply)")
        }
    }

    public func consumeOnce(_ digest: [UInt8], expiresAt: Double, now: Double) async throws(IssuerStateError) -> Bool {
        let name = key("u", digest)
        let reply = try await run(["EVAL", Self.consumeScript, "1", name, String(now), String(expiresAt), ttl(expiresAt, now)], name)
        return reply == .integer(1)
    }

    // MARK: scripts (each one atomic in Redis)

    /// Stores the key's hash unless the key exists.
    static let insertScript = """
    if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
    redis.call('HSET', KEYS[1], 'app', ARGV[1], 'pub', ARGV[2], 'ctr', ARGV[3], 'env', ARGV[4], 'rcpt', ARGV[5], 'at', ARGV[6],
               'win', ARGV[7], 'risk', ARGV[8], 'rnb', ARGV[9], 'rra', ARGV[10])
    return 1
    """

    /// The counter window (`CounterWindow`'s arithmetic on a string of 64 '0'/'1', character d for the counter d
    /// below the highest): 0 accepted, 1 repeated, 2 below the window, 3 unknown key (or another app's). The
    /// highest fits a double exactly (it is a UInt32).
    static let acceptScript = """
    local app = redis.call('HGET', KEYS[1], 'app')
    if not app or app ~= ARGV[1] then return 3 end
    local highest = tonumber(redis.call('HGET', KEYS[1], 'ctr'))
    local c = tonumber(ARGV[2])
    if highest == nil or c == nil then return redis.error_reply('counter unreadable') end
    local win = redis.call('HGET', KEYS[1], 'win')
    if not win or #win ~= 64 then win = string.rep('0', 64) end
    if c == highest then return 1 end
    if c < highest then
      local d = highest - c
      if d > 64 then return 2 end
      if string.sub(win, d, d) == '1' then return 1 end
      redis.call('HSET', KEYS[1], 'win', string.sub(win, 1, d - 1) .. '1' .. string.sub(win, d + 1))
      return 0
    end
    local shift = c - highest
    if shift > 64 then
      win = string.rep('0', 64)
    else
      win = string.rep('0', shift - 1) .. '1' .. string.sub(win, 1, 64 - shift)
    end
    redis.call('HSET', KEYS[1], 'ctr', ARGV[2], 'win', win)
    return 0
    """

    /// Reserves one of the address's slots: drops members expired at ARGV[2] (`now`), refuses (0) when ARGV[4]
    /// remain, else adds member ARGV[1] scored ARGV[3] (`expires_at`) and keeps the set alive for ARGV[5] ms (1).
    static let reserveScript = """
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
    if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
    redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
    if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
    return 1
    """

    /// Records a one-time input unless it is recorded and not expired at `now`.
    static let consumeScript = """
    local expires = tonumber(redis.call('GET', KEYS[1]))
    if expires and expires > tonumber(ARGV[1]) then return 0 end
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
    return 1
    """

    // MARK: plumbing

    func key(_ kind: String, _ bytes: [UInt8]) -> String {
        "\(prefix)\(kind):{\(Self.hex(bytes))}"
    }

    static func hex(_ bytes: [UInt8]) -> String {
        var hex = ""
        hex.reserveCapacity(bytes.count * 2)
        for b in bytes { hex += String(b, radix: 16).count == 1 ? "0" + String(b, radix: 16) : String(b, radix: 16) }
        return hex
    }

    /// `window` as the script keeps it: 64 bytes '0'/'1', byte k for bit k.
    static func windowText(_ window: UInt64) -> [UInt8] {
        (0..<64).map { window & (UInt64(1) << $0) != 0 ? UInt8(ascii: "1") : UInt8(ascii: "0") }
    }

    /// The script's text back to bits; nil when it is not 64 '0'/'1'.
    static func window(_ text: [UInt8]) -> UInt64? {
        guard text.count == 64 else { return nil }
        var window: UInt64 = 0
        for (k, c) in text.enumerated() {
            switch c {
            case UInt8(ascii: "1"): window |= UInt64(1) << k
            case UInt8(ascii: "0"): break
            default: return nil
            }
        }
        return window
    }

    /// Milliseconds until `expiresAt` from `now`, at least 1 s (Redis only cleans up; expiry is judged on read).
    /// How long Redis keeps a key past its expiry. Every decision compares expiry times itself (a challenge's
    /// `expires_at`, a member's score, a used input's value), so Redis's own expiry is only garbage collection: the
    /// grace keeps a key from vanishing early for an instance whose clock runs a little behind, or a caller slowed
    /// down between two steps.
    static let expiryGraceMilliseconds = 60_000

    private func ttl(_ expiresAt: Double, _ now: Double) -> String {
        String(max(1000, Int(((expiresAt - now) * 1000).rounded(.up))) + Self.expiryGraceMilliseconds)
    }

    func run(_ args: [String], _ routingKey: String) async throws(IssuerStateError) -> RESP.Value {
        try await runBytes(args.map { Array($0.utf8) }, routingKey)
    }

    func runBytes(_ args: [[UInt8]], _ routingKey: String) async throws(IssuerStateError) -> RESP.Value {
        let executor = LoopBound(self.executor)
        let loop = self.loop
        let reply: RedisReply = await withCheckedContinuation { continuation in
            loop.execute {
                executor.value.execute(args, routingKey: Array(routingKey.utf8)) { reply in continuation.resume(returning: reply) }
            }
        }
        switch reply {
        case .failure(let why): throw IssuerStateError("redis: \(why)")
        case .value(.error(let message)): throw IssuerStateError("redis: \(message)")
        case .value(let value): return value
        }
    }
}

