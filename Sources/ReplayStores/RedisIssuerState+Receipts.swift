import Foundation

/// Redis keeps each key's receipt fields in its hash (`rcpt`, `risk`, `rnb`, `rra`; "" is nil) and the refresh
/// schedule in one sorted set `<prefix>receipts_due` (member: the key ID in hex, score: the refresh time), written
/// after the hash (a cluster keeps the two in different slots, so not in one script). A member whose hash is
/// gone is dropped when met.
extension RedisIssuerState: IssuerReceiptState {
    var dueSetName: String { prefix + "receipts_due" }

    public func storeReceipt(_ keyId: [UInt8], appId: String, receipt: [UInt8], riskMetric: Int?, notBefore: Double?,
                             refreshAt: Double?) async throws(IssuerStateError) -> Bool {
        let name = key("k", keyId)
        let reply = try await runBytes([Array("EVAL".utf8), Array(Self.storeReceiptScript.utf8), Array("1".utf8), Array(name.utf8),
                                        Array(appId.utf8), receipt, Self.optionalText(riskMetric), Self.optionalText(notBefore),
                                        Self.optionalText(refreshAt)], name)
        guard reply == .integer(1) else { return false }
        try await scheduleRefresh(keyIdHex: Self.hex(keyId), at: refreshAt)
        return true
    }

    public func scheduleRefresh(_ keyId: [UInt8], appId: String, at: Double?) async throws(IssuerStateError) -> Bool {
        let name = key("k", keyId)
        let reply = try await runBytes([Array("EVAL".utf8), Array(Self.scheduleScript.utf8), Array("1".utf8), Array(name.utf8),
                                        Array(appId.utf8), Self.optionalText(at)], name)
        guard reply == .integer(1) else { return false }
        try await scheduleRefresh(keyIdHex: Self.hex(keyId), at: at)
        return true
    }

    /// `SET <prefix>rc:{<key id hex>} <owner> NX PX <lease>` (the key's own hash tag, so one slot on a cluster):
    /// only one instance holds the claim until it releases it or the lease ends. The holder then reads the key's
    /// refresh time again, since another instance may have refreshed it between our due list and our claim: not due
    /// (or gone) → the claim is given back and false. Due → the refresh time moves to `leaseUntil` (and the due set).
    public func claimRefresh(_ keyId: [UInt8], appId: String, now: Double, leaseUntil: Double) async throws(IssuerStateError) -> Bool {
        let claim = key("rc", keyId)
        let lease = String(max(1000, Int(((leaseUntil - now) * 1000).rounded(.up))))
        guard try await run(["SET", claim, claimOwner, "NX", "PX", lease], claim) == .simple("OK") else { return false }
        let name = key("k", keyId)
        let reply = try await run(["HMGET", name, "app", "rra"], name)
        guard case .array(let fields) = reply, fields.count == 2, case .bulk(let app) = fields[0],
              String(decoding: app, as: UTF8.self) == appId, case .bulk(let rra) = fields[1],
              let at = Double(String(decoding: rra, as: UTF8.self)), at <= now,
              try await scheduleRefresh(keyId, appId: appId, at: leaseUntil) else {
            try await releaseRefreshClaim(keyId, appId: appId)
            return false
        }
        return true
    }

    /// Deletes the claim key only while it holds this instance's owner token (one script), so a claim another
    /// instance took after ours lapsed is never released by us.
    public func releaseRefreshClaim(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) {
        let claim = key("rc", keyId)
        _ = try await run(["EVAL", Self.releaseScript, "1", claim, claimOwner], claim)
    }

    /// `<prefix>rp:{<app id hex>}` = "<until> <length>", expiring an hour after the pause ends (so the next failure
    /// still doubles a recent pause's length).
    public func refreshPause(appId: String) async throws(IssuerStateError) -> ReceiptRefreshPause? {
        let name = key("rp", Array(appId.utf8))
        guard case .bulk(let value) = try await run(["GET", name], name) else { return nil }
        let parts = String(decoding: value, as: UTF8.self).split(separator: " ")
        guard parts.count == 2, let until = Double(parts[0]), let length = Double(parts[1]) else { return nil }
        return ReceiptRefreshPause(until: until, length: length)
    }

    public func setRefreshPause(appId: String, _ pause: ReceiptRefreshPause?) async throws(IssuerStateError) {
        let name = key("rp", Array(appId.utf8))
        guard let pause else {
            _ = try await run(["DEL", name], name)
            return
        }
        let keep = max(1, Int((pause.until - Date().timeIntervalSince1970 + 3600).rounded(.up)))
        _ = try await run(["SET", name, "\(pause.until) \(pause.length)", "EX", String(keep)], name)
    }

    static let releaseScript = """
    if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
    return 0
    """

    public func keysDueForRefresh(now: Double, limit: Int) async throws(IssuerStateError) -> [AttestedKey] {
        let set = dueSetName
        let reply = try await run(["ZRANGEBYSCORE", set, "-inf", String(now), "LIMIT", "0", String(max(0, limit))], set)
        guard case .array(let items) = reply else { throw IssuerStateError("redis: unexpected ZRANGEBYSCORE reply") }
        var keys: [AttestedKey] = []
        for item in items {
            guard case .bulk(let member) = item else { continue }
            let hex = String(decoding: member, as: UTF8.self)
            guard let keyId = Self.unhex(hex) else { _ = try await run(["ZREM", set, hex], set); continue }
            let name = key("k", keyId)
            guard case .bulk(let app) = try await run(["HGET", name, "app"], name),
                  let found = try await key(keyId, appId: String(decoding: app, as: UTF8.self)) else {
                _ = try await run(["ZREM", set, hex], set)
                continue
            }
            keys.append(found)
        }
        return keys
    }

    /// Puts the key in the due set at `at`, or takes it out.
    func scheduleRefresh(keyIdHex: String, at: Double?) async throws(IssuerStateError) {
        let set = dueSetName
        if let at { _ = try await run(["ZADD", set, String(at), keyIdHex], set) } else { _ = try await run(["ZREM", set, keyIdHex], set) }
    }

    static func optionalText<T: LosslessStringConvertible>(_ value: T?) -> [UInt8] { value.map { Array(String($0).utf8) } ?? [] }

    static func unhex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0, !digits.isEmpty else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[i..<i + 2], as: UTF8.self), radix: 16) else { return nil }
            out.append(byte)
        }
        return out
    }

    /// Replaces the receipt fields of an existing key of app ARGV[1] (1), or 0.
    static let storeReceiptScript = """
    local app = redis.call('HGET', KEYS[1], 'app')
    if not app or app ~= ARGV[1] then return 0 end
    redis.call('HSET', KEYS[1], 'rcpt', ARGV[2], 'risk', ARGV[3], 'rnb', ARGV[4], 'rra', ARGV[5])
    return 1
    """

    /// Sets the next refresh of an existing key of app ARGV[1] (1), or 0.
    static let scheduleScript = """
    local app = redis.call('HGET', KEYS[1], 'app')
    if not app or app ~= ARGV[1] then return 0 end
    redis.call('HSET', KEYS[1], 'rra', ARGV[2])
    return 1
    """
}
