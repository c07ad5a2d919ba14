import EventLoop
import Foundation
import JSONLog
import Synchronization

/// The issuer's state in Redis (docs/issuer.md "State"): shared by every gateway instance on the same Redis, durable
/// as far as the server is (use AOF or RDB persistence: attested keys must survive restarts). Works with one server
/// (`redis://`, `rediss://`) and with a cluster (`redis+cluster://`): every entity's keys share one `{hash tag}`.
///
/// Layout under `key_prefix` (default `appcheck:issuer:`):
/// - `c:{<challenge hex>}` → `<app_id>\n<expires_at>`, removed with `GETDEL` (single use, bound to its app);
/// - `k:{<key id hex>}` → a hash `app`, `pub`, `ctr`, `env`, `rcpt`, `at`; the counter is advanced by one Lua script
///   that sets it only when the stored one is lower (the compare-and-set: two assertions with one counter never
///   both pass);
/// - `u:{<digest hex>}` → `<expires_at>`, set by a Lua script only when absent or expired (one-time inputs).
/// Expiry is decided against the `now` the caller passes, so every instance judges time alike; Redis TTLs only
/// clean up.
///
/// Commands run on a loop of the store's own (the executor is loop-confined); callers `await` their answer.
public final class RedisIssuerState: IssuerState, @unchecked Sendable {
    private let loop: EventLoop
    private let executor: RedisCommandExecutor & RedisLifecycle
    private let prefix: String
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
        let executor = Unchecked(executor)
        loop.execute { executor.value.start() }
    }

    /// Stops the store's loop (connections close).
    public func close() {
        let executor = Unchecked(self.executor)
        loop.execute { executor.value.shutdown() }
        loop.stop()
        exited.wait()
    }

    // MARK: IssuerState

    public func putChallenge(_ challenge: [UInt8], appId: String, now: Double, expiresAt: Double) async throws(IssuerStateError) {
        let reply = try await run(["SET", key("c", challenge), "\(appId)\n\(expiresAt)", "PX", ttl(expiresAt, now)], key("c", challenge))
        guard case .simple("OK") = reply else { throw IssuerStateError("redis SET: \(reply)") }
    }

    public func takeChallenge(_ challenge: [UInt8], appId: String, now: Double) async throws(IssuerStateError) -> Bool {
        let reply = try await run(["GETDEL", key("c", challenge)], key("c", challenge))
        guard case .bulk(let bytes) = reply else { return false }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: "\n", maxSplits: 1)
        guard parts.count == 2, String(parts[0]) == appId, let expiresAt = Double(parts[1]) else { return false }
        return now < expiresAt
    }

    public func insertKey(_ k: AttestedKey) async throws(IssuerStateError) -> Bool {
        let name = key("k", k.keyId)
        let reply = try await runBytes([Array("EVAL".utf8), Array(Self.insertScript.utf8), Array("1".utf8), Array(name.utf8),
                                        Array(k.appId.utf8), k.publicKey, Array(String(k.counter).utf8),
                                        Array(k.environment.utf8), k.receipt, Array(String(k.attestedAt).utf8)], name)
        return reply == .integer(1)
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
        return AttestedKey(keyId: keyId, appId: appId, publicKey: pub, counter: counter, environment: env, receipt: receipt,
                           attestedAt: at)
    }

    public func advanceCounter(_ keyId: [UInt8], appId: String, to counter: UInt32) async throws(IssuerStateError) -> Bool {
        let name = key("k", keyId)
        let reply = try await run(["EVAL", Self.advanceScript, "1", name, appId, String(counter)], name)
        return reply == .integer(1)
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
    redis.call('HSET', KEYS[1], 'app', ARGV[1], 'pub', ARGV[2], 'ctr', ARGV[3], 'env', ARGV[4], 'rcpt', ARGV[5], 'at', ARGV[6])
    return 1
    """

    /// The counter compare-and-set: only a strictly greater counter of the same app is stored.
    static let advanceScript = """
    local app = redis.call('HGET', KEYS[1], 'app')
    if not app or app ~= ARGV[1] then return 0 end
    local current = tonumber(redis.call('HGET', KEYS[1], 'ctr'))
    local proposed = tonumber(ARGV[2])
    if current == nil or proposed == nil or proposed <= current then return 0 end
    redis.call('HSET', KEYS[1], 'ctr', ARGV[2])
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

    private func key(_ kind: String, _ bytes: [UInt8]) -> String {
        var hex = ""
        hex.reserveCapacity(bytes.count * 2)
        for b in bytes { hex += String(b, radix: 16).count == 1 ? "0" + String(b, radix: 16) : String(b, radix: 16) }
        return "\(prefix)\(kind):{\(hex)}"
    }

    /// Milliseconds until `expiresAt` from `now`, at least 1 s (Redis only cleans up; expiry is judged on read).
    private func ttl(_ expiresAt: Double, _ now: Double) -> String {
        String(max(1000, Int(((expiresAt - now) * 1000).rounded(.up))))
    }

    private func run(_ args: [String], _ routingKey: String) async throws(IssuerStateError) -> RESP.Value {
        try await runBytes(args.map { Array($0.utf8) }, routingKey)
    }

    private func runBytes(_ args: [[UInt8]], _ routingKey: String) async throws(IssuerStateError) -> RESP.Value {
        let executor = Unchecked(self.executor)
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

/// Carries a loop-confined object into a `@Sendable` closure that runs on its loop.
private struct Unchecked<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
