import Dispatch
import EventLoop
import Foundation
import JSONLog
import Synchronization
import Testing
import TestSupport
@testable import ReplayStores


// MARK: - memory store

@Suite struct ReplayMemoryStoreTests {
    @Test func firstUseConsumedSecondReused() throws {
        let t = try ReplayTestLoop()
        defer { t.stop() }
        let store = MemoryReplayStore()
        let client = store.makeClient(for: t.loop)
        let k = ReplayTest.key("a")
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.key("b")) == .consumed)
        #expect(store.count == 2)
        #expect(store.counters.consumed == 2)
        #expect(store.counters.reused == 1)
        #expect(store.counters.errors == 0)
        #expect(store.readinessProblem() == nil)
    }

    @Test func completesSynchronouslyOnTheLoopThread() throws {
        let t = try ReplayTestLoop()
        defer { t.stop() }
        let store = MemoryReplayStore()
        let client = LoopBound(store.makeClient(for: t.loop))
        let loop = t.loop
        let collector = ReplayCollector()
        loop.execute {
            var done = false
            client.value.consume(key: ReplayTest.key("s"), expiresAt: ReplayTest.later(), issuedAt: ReplayTest.later(0)) { r in
                done = loop.inLoop
                collector.add(r)
            }
            if !done { collector.add(.unavailable("not synchronous on loop")) }
        }
        #expect(collector.wait(count: 1) == [.consumed])
    }

    @Test func fiftyConcurrentConsumesOfOneKeyGiveExactlyOneConsumed() throws {
        let a = try ReplayTestLoop("a"), b = try ReplayTestLoop("b")
        defer { a.stop(); b.stop() }
        let store = MemoryReplayStore()
        let results = ReplayTest.race([(store.makeClient(for: a.loop), a.loop), (store.makeClient(for: b.loop), b.loop)],
                                      key: ReplayTest.randomKey())
        #expect(results.count == 50)
        #expect(results.filter { $0 == .consumed }.count == 1)
        #expect(results.filter { $0 == .reused }.count == 49)
    }

    @Test func expiryFreesEntries() throws {
        let t = try ReplayTestLoop()
        defer { t.stop() }
        let store = MemoryReplayStore(sweepInterval: 0.1)
        let client = store.makeClient(for: t.loop)
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k, expiresAt: ReplayTest.later(1)) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey(), expiresAt: ReplayTest.later(60)) == .consumed)
        #expect(store.count == 2)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
        // The periodic sweep removes the expired entry; the long-lived one stays.
        #expect(ReplayTest.eventually(5) { store.count == 1 })
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
    }

    @Test func expiredButUnprunedEntryCountsAsFree() {
        let store = MemoryReplayStore()
        let k = ReplayTest.randomKey()
        #expect(store.consume(key: k, expiresAt: 100, issuedAt: nil, now: 50) == .consumed)
        #expect(store.consume(key: k, expiresAt: 200, issuedAt: nil, now: 99.9) == .reused)
        #expect(store.consume(key: k, expiresAt: 200, issuedAt: nil, now: 100) == .consumed)
        #expect(store.consume(key: k, expiresAt: 300, issuedAt: nil, now: 150) == .reused)
        store.sweep(now: 150)
        #expect(store.count == 1) // the stale heap element of expiry 100 did not remove the live entry
        store.sweep(now: 200)
        #expect(store.count == 0)
    }

    @Test func fullStoreFailsClosedInsteadOfEvicting() {
        let store = MemoryReplayStore(maxEntries: 64) // one entry per shard
        var first = [UInt8](repeating: 1, count: 32)
        var second = first
        second[31] = 2
        first[0] = 5; second[0] = 5 // same shard
        #expect(store.consume(key: first, expiresAt: 1000, issuedAt: nil, now: 10) == .consumed)
        #expect(store.consume(key: second, expiresAt: 1000, issuedAt: nil, now: 10) == .unavailable("full"))
        #expect(store.consume(key: first, expiresAt: 1000, issuedAt: nil, now: 10) == .reused) // never evicted
        // Once the first expires its slot is reusable.
        #expect(store.consume(key: second, expiresAt: 2000, issuedAt: nil, now: 1000) == .consumed)
        #expect(store.counters.errors == 1)
    }

    @Test func replayKeysHoldTheirBytesInPlace() throws {
        let bytes = (0..<32).map { UInt8($0 * 7 + 3) }
        let key = try #require(ReplayKey(bytes))
        #expect(key.bytes == bytes)
        #expect(key.firstByte == bytes[0])
        #expect(ReplayKey(Array(bytes.dropLast())) == nil)
        #expect(ReplayKey(bytes + [0]) == nil)
        var other = bytes
        other[31] ^= 1
        #expect(ReplayKey(other) != key)
        // A key taken as bytes is the same key taken in place: the second use is a replay either way.
        let store = MemoryReplayStore()
        #expect(store.consume(key: bytes, expiresAt: 100, issuedAt: nil, now: 50) == .consumed)
        #expect(store.consume(key: key, expiresAt: 100, issuedAt: nil, now: 50) == .reused)
        #expect(store.consume(key: try #require(ReplayKey(other)), expiresAt: 100, issuedAt: nil, now: 50) == .consumed)
        #expect(store.consume(key: other, expiresAt: 100, issuedAt: nil, now: 50) == .reused)
    }

    /// A table hashes a key without the hasher, from its second word: keys of one shard (one first byte) still
    /// spread over the buckets, which the low bits of the hash pick. Hashed from the first word, 4,096 keys of one
    /// shard would have had at most 16 distinct low 12 bits.
    @Test func keysOfOneShardSpreadOverTheBuckets() throws {
        // Uniform words, as SHA-256 gives (SplitMix64, fixed seed), all in one shard.
        var state: UInt64 = 0x1234_5678
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        var keys: [ReplayKey] = []
        for _ in 0..<4096 {
            keys.append(ReplayKey(words: ((next() & ~0xFF) | 0x2A, next(), next(), next())))
        }
        for seed in [0, 1, Int.max, -12345] {
            let buckets = Set(keys.map { $0._rawHashValue(seed: seed) & 0xFFF })
            #expect(buckets.count > 2000, "seed \(seed): \(buckets.count) buckets of 4,096")
        }
        #expect(keys[0]._rawHashValue(seed: 7) == (try #require(ReplayKey(keys[0].bytes)))._rawHashValue(seed: 7))
        // Two seeds that differ only above the bucket bits still order the buckets differently.
        let a = keys.prefix(256).map { $0._rawHashValue(seed: 0) & 0xFFF }, b = keys.prefix(256).map { $0._rawHashValue(seed: 1 << 40) & 0xFFF }
        #expect(a != b)
        #expect(Set(keys).count == 4096)
        let store = MemoryReplayStore()
        for key in keys { #expect(store.consume(key: key, expiresAt: 100, issuedAt: nil, now: 50) == .consumed) }
        for key in keys.prefix(64) { #expect(store.consume(key: key, expiresAt: 100, issuedAt: nil, now: 50) == .reused) }
    }

    /// A token with a jti is keyed on its identity (sub + "\n" + jti) by the store itself (`tokenIDKey`): the same
    /// identity is one key (its second use a replay), any other identity another key; the keys are the store's own
    /// (secret seeds) and spread over every shard.
    @Test func tokenIDsKeyTokensWithAJTI() throws {
        let store = MemoryReplayStore()
        func consume(_ sub: String, _ jti: String, now: Double = 50) -> ReplayResult {
            store.consume(sub: sub, jti: jti, expiresAt: 100, issuedAt: nil, now: now)
        }
        #expect(consume("1:123:ios:abc", "J1") == .consumed)
        #expect(consume("1:123:ios:abc", "J1") == .reused)
        #expect(consume("1:123:ios:abc", "J2") == .consumed)
        #expect(consume("1:123:ios:abd", "J1") == .consumed)
        #expect(consume("1:123:ios:ab", "cJ1") == .consumed)  // the same bytes split elsewhere: another identity
        #expect(consume("1:123:ios:abc", "J1x") == .consumed)
        #expect(consume("1:123:ios:abc", "J1", now: 99.9) == .reused)
        #expect(consume("1:123:ios:abc", "J1", now: 100) == .consumed)  // free again once expired
        #expect(store.counters.consumed == 6 && store.counters.reused == 2)
        // The key of the bytes sub + "\n" + jti, the same for the store whatever the strings' storage.
        let key = store.tokenIDKey(sub: "1:123:ios:abc", jti: "J1")
        #expect(key == Array("1:123:ios:abc\nJ1".utf8).withUnsafeBytes { store.tokenIDKey($0) })
        #expect(key == store.tokenIDKey(sub: String("x1:123:ios:abc".dropFirst()), jti: "J1"))
        #expect(key != MemoryReplayStore().tokenIDKey(sub: "1:123:ios:abc", jti: "J1"))
        // Strings too long to be stored inline (a real App ID and jti), read where their storage lies.
        let appId = "1:123456789012:ios:0123456789abcdef", jti = "QUJDREVGR0hJSktMTU5PUA"
        #expect(store.tokenIDKey(sub: appId, jti: jti)
            == Array((appId + "\n" + jti).utf8).withUnsafeBytes { store.tokenIDKey($0) })
        let shards = Set((0..<2000).map { store.tokenIDKey(sub: "app", jti: "\($0)").firstByte & 63 })
        #expect(shards.count == 64)
    }

    /// Through a loop's client: `consumeNow(sub:jti:)` answers at once, as `consumeNow(key:)` does.
    @Test func clientConsumesTokenIDsAtOnce() throws {
        let t = try ReplayTestLoop()
        defer { t.stop() }
        let store = MemoryReplayStore(stateSince: 0)
        let client = LoopBound(store.makeClient(for: t.loop))
        let collector = ReplayCollector()
        t.loop.execute {
            for _ in 0..<2 {
                let result = client.value.consumeNow(sub: "app", jti: "jti", expiresAt: ReplayTest.later(), issuedAt: 10, now: 20)
                collector.add(result ?? .unavailable("no answer at once"))
            }
        }
        #expect(collector.wait(count: 2) == [.consumed, .reused])
    }

    /// SipHash-2-4 against the reference vectors (key 00 01 … 0f, message 00 01 … of the given length).
    @Test func sipHashMatchesTheReferenceVectors() {
        let key: (UInt64, UInt64) = (0x0706_0504_0302_0100, 0x0F0E_0D0C_0B0A_0908)
        func message(_ count: Int) -> [UInt8] { (0..<count).map { UInt8($0) } }
        #expect(message(0).withUnsafeBytes { SipHash.hash64($0, key: key) } == 0x726F_DB47_DD0E_0E31)
        #expect(message(15).withUnsafeBytes { SipHash.hash64($0, key: key) } == 0xA129_CA61_49BE_45E5)
        let wide = message(0).withUnsafeBytes { SipHash.hash128($0, key: key) }
        let bytes = withUnsafeBytes(of: (wide.0.littleEndian, wide.1.littleEndian)) { Array($0) }
        #expect(bytes == [0xA3, 0x81, 0x7F, 0x04, 0xBA, 0x25, 0xA8, 0xE6, 0x6D, 0xF6, 0x72, 0x14, 0xC7, 0x55, 0x02, 0x93])
        // Every length up to two words and a half: a function of the bytes and the key alone.
        var seen = Set<UInt64>()
        for count in 0...20 {
            let m = message(count)
            let h = m.withUnsafeBytes { SipHash.hash128($0, key: key) }
            #expect(h == m.withUnsafeBytes { SipHash.hash128($0, key: key) })
            #expect(h != m.withUnsafeBytes { SipHash.hash128($0, key: (key.0 ^ 1, key.1)) })
            seen.insert(h.0)
        }
        #expect(seen.count == 21)
    }

    /// A plain SipHash-c-d for the tests: the message padded to whole words with its length in the last byte, as the
    /// paper writes it (no overlapping loads), in its 64- and 128-bit forms.
    static func referenceSipHash(_ message: [UInt8], key: (UInt64, UInt64), c: Int, d: Int, wide: Bool) -> (UInt64, UInt64) {
        func rotl(_ x: UInt64, _ b: UInt64) -> UInt64 { x << b | x >> (64 - b) }
        var v0 = key.0 ^ 0x736F_6D65_7073_6575, v1 = key.1 ^ 0x646F_7261_6E64_6F6D ^ (wide ? 0xEE : 0)
        var v2 = key.0 ^ 0x6C79_6765_6E65_7261, v3 = key.1 ^ 0x7465_6462_7974_6573
        func round() {
            v0 = v0 &+ v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32)
            v2 = v2 &+ v3; v3 = rotl(v3, 16); v3 ^= v2
            v0 = v0 &+ v3; v3 = rotl(v3, 21); v3 ^= v0
            v2 = v2 &+ v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32)
        }
        var padded = message
        while padded.count % 8 != 7 { padded.append(0) }
        padded.append(UInt8(truncatingIfNeeded: message.count))
        for w in stride(from: 0, to: padded.count, by: 8) {
            let m = (0..<8).reduce(UInt64(0)) { $0 | UInt64(padded[w + $1]) << (8 * UInt64($1)) }
            v3 ^= m
            for _ in 0..<c { round() }
            v0 ^= m
        }
        v2 ^= wide ? 0xEE : 0xFF
        for _ in 0..<d { round() }
        let first = v0 ^ v1 ^ v2 ^ v3
        guard wide else { return (first, 0) }
        v1 ^= 0xDD
        for _ in 0..<d { round() }
        return (first, v0 ^ v1 ^ v2 ^ v3)
    }

    /// Every length from 0 to 64 bytes (whole words, then the remaining bytes, read as the top of the last eight once
    /// there are eight) against the plain reference, for SipHash-2-4 and the SipHash-1-3 the stores use, both widths.
    @Test func sipHashMatchesAPlainReferenceOnEveryLength() {
        let key: (UInt64, UInt64) = (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)
        for count in 0...64 {
            let m = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 29 &+ 113) }
            m.withUnsafeBytes { bytes in
                #expect(SipHash.hash64(bytes, key: key) == Self.referenceSipHash(m, key: key, c: 2, d: 4, wide: false).0)
                let wide = SipHash.hash128(bytes, key: key)
                let wideReference = Self.referenceSipHash(m, key: key, c: 2, d: 4, wide: true)
                #expect(wide.0 == wideReference.0 && wide.1 == wideReference.1, "length \(count)")
                let fast = SipHash.hash128(bytes, key: key, compressionRounds: 1, finalizationRounds: 3)
                let fastReference = Self.referenceSipHash(m, key: key, c: 1, d: 3, wide: true)
                #expect(fast.0 == fastReference.0 && fast.1 == fastReference.1, "length \(count)")
            }
        }
    }

    @Test func rejectsBadKeyLengthAndClosedStore() {
        let store = MemoryReplayStore()
        #expect(ReplayTest.isUnavailable(store.consume(key: [1, 2, 3], expiresAt: 10, issuedAt: nil, now: 1)))
        store.close()
        #expect(store.consume(key: ReplayTest.randomKey(), expiresAt: 10, issuedAt: nil, now: 1) == .unavailable("closed"))
        #expect(store.readinessProblem() != nil)
    }

    @Test func factoryBuildsMemoryStore() throws {
        var s = ReplaySettings()
        s.store = .memory
        let store = try makeReplayStore(s, logSink: LogSink(fd: 2))
        #expect(store is MemoryReplayStore)
    }
}

// MARK: - RESP and URL parsing

@Suite struct ReplayProtocolTests {
    func parse(_ text: String) -> RESP.ParseResult {
        Array(text.utf8).withUnsafeBytes { RESP.parse($0) }
    }

    @Test func parsesRepliesWholeAndByteByByte() {
        let cases: [(String, RESP.Value)] = [
            ("+OK\r\n", .simple("OK")), ("-ERR nope\r\n", .error("ERR nope")), (":-42\r\n", .integer(-42)),
            ("$3\r\nabc\r\n", .bulk(Array("abc".utf8))), ("$0\r\n\r\n", .bulk([])), ("$-1\r\n", .null),
            ("_\r\n", .null), ("*-1\r\n", .null),
        ]
        for (text, value) in cases {
            #expect(parse(text) == .value(value, consumed: text.utf8.count))
            let bytes = Array(text.utf8)
            for n in 0..<bytes.count {
                #expect(bytes[0..<n].withUnsafeBytes { RESP.parse($0) } == .needMore, "prefix \(n) of \(text)")
            }
        }
        #expect(parse("+OK\r\n:1\r\n") == .value(.simple("OK"), consumed: 5))
    }

    /// Nested arrays (CLUSTER SLOTS, script replies): whole, and every prefix asks for more.
    @Test func parsesNestedArrays() {
        let text = "*2\r\n*3\r\n:0\r\n:5460\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n*0\r\n+OK\r\n"
        let value = RESP.Value.array([
            .array([.integer(0), .integer(5460), .array([.bulk(Array("127.0.0.1".utf8)), .integer(7000)])]),
            .array([]),
        ])
        #expect(parse(text) == .value(value, consumed: text.utf8.count - 5))
        let bytes = Array(text.utf8)
        for n in 0..<(bytes.count - 5) {
            #expect(bytes[0..<n].withUnsafeBytes { RESP.parse($0) } == .needMore, "prefix \(n)")
        }
    }

    @Test func rejectsMalformedReplies() {
        for bad in ["?x\r\n", "+OK\n", "+O\rK\r\n", ":12a\r\n", ":\r\n", ":+1\r\n", "$-2\r\n", "$3\r\nabcd\r\n",
                    "$99999999\r\n", "*99999999\r\n", "*1\r\n?x\r\n", "*-2\r\n",
                    String(repeating: "*1\r\n", count: 6) + ":1\r\n", ":99999999999999999999\r\n"] {
            guard case .failure = parse(bad) else { Issue.record("accepted \(bad.debugDescription)"); continue }
        }
        let long = "+" + String(repeating: "a", count: RESP.maxLineLength + 10)
        guard case .failure = parse(long) else { Issue.record("accepted an overlong line"); return }
    }

    @Test func encodesCommands() {
        let out = IOBuffer()
        RESP.encodeCommand(["SET", "k", "1"], into: out)
        #expect(String(decoding: out.readableBytes(), as: UTF8.self) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n")
    }

    @Test func parsesRedisURLs() throws {
        typealias N = RedisEndpoint.Node
        func ep(_ nodes: [N], tls: Bool = false, cluster: Bool = false, ca: String? = nil, user: String? = nil,
                password: String? = nil, db: Int = 0) -> RedisEndpoint {
            RedisEndpoint(nodes: nodes, tls: tls, cluster: cluster, caFile: ca, user: user, password: password, db: db)
        }
        #expect(try RedisEndpoint.parse("redis://127.0.0.1:6379/0") == ep([N(host: "127.0.0.1", port: 6379)]))
        #expect(try RedisEndpoint.parse("redis://cache") == ep([N(host: "cache", port: 6379)]))
        #expect(try RedisEndpoint.parse("redis://u:p%40ss@h:7000/3") == ep([N(host: "h", port: 7000)], user: "u", password: "p@ss", db: 3))
        #expect(try RedisEndpoint.parse("redis://:secret@[::1]:6380") == ep([N(host: "::1", port: 6380)], password: "secret"))
        #expect(try RedisEndpoint.parse("rediss://app:pw@cache.internal:6380?ca_file=/etc/ca%20x.pem")
                == ep([N(host: "cache.internal", port: 6380)], tls: true, ca: "/etc/ca x.pem", user: "app", password: "pw"))
        #expect(try RedisEndpoint.parse("rediss://h") == ep([N(host: "h", port: 6379)], tls: true))
        #expect(try RedisEndpoint.parse("redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]")
                == ep([N(host: "10.0.0.1", port: 7000), N(host: "10.0.0.2", port: 7001), N(host: "::1", port: 6379)], cluster: true))
        #expect(try RedisEndpoint.parse("rediss+cluster://:pw@h1:7000,h2:7000/0?ca_file=/ca.pem")
                == ep([N(host: "h1", port: 7000), N(host: "h2", port: 7000)], tls: true, cluster: true, ca: "/ca.pem", password: "pw"))
        let bad: [(String, String)] = [
            ("http://h", "unknown scheme \"http\""), ("cache:6379", "unknown scheme \"none\""),
            ("redis://", "missing host"), ("redis://:pw@:6379", "missing host"), ("redis://h:0", "bad port"),
            ("redis://h:99999", "bad port"), ("redis://h:x", "bad port"), ("redis://h/x", "database must be a number"),
            ("redis://user@h", "credentials"), ("redis://h?x=1", "unknown query parameter"),
            ("redis://h?ca_file=/ca.pem", "ca_file needs a TLS scheme"), ("rediss://h?ca_file=", "ca_file is empty"),
            ("redis://a:1,b:2", "several hosts need redis+cluster://"), ("redis+cluster://a:1,,b:2", "missing host"),
            ("redis+cluster://a:1/2", "only database 0"), ("redis://h#f", "fragment"),
        ]
        for (url, fragment) in bad {
            #expect(throws: ReplayStoreError.self, "\(url)") { try RedisEndpoint.parse(url) }
            do { _ = try RedisEndpoint.parse(url) } catch {
                #expect("\(error)".hasPrefix("replay.redis_url: ") && "\(error)".contains(fragment), "\(url): \(error)")
            }
        }
        // The password never appears in an error.
        do { _ = try RedisEndpoint.parse("htp://u:hunter2@h") } catch { #expect(!"\(error)".contains("hunter2")) }
    }
}
