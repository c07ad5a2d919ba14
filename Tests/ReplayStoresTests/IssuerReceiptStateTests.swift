import Foundation
import JSONLog
import Testing
import TestSupport
@testable import ReplayStores

/// The receipt side of the issuer's state (docs/issuer.md "Fraud risk") in memory, SQLite and Redis: the receipt,
/// risk metric, not-before and refresh time are kept with the key, replaced by newer receipts, and the keys due
/// for a refresh are listed earliest first; old files and old Redis hashes read as "unknown".
@Suite struct IssuerReceiptStateTests {
    static let app = IssuerStateTests.app

    static func exercise(_ state: IssuerReceiptState) async throws {
        var a = IssuerStateTests.key(21)
        a.riskMetric = 2
        a.receiptNotBefore = 1_800_000_500
        a.receiptRefreshAt = 1_800_000_100
        var b = IssuerStateTests.key(22)
        b.receiptRefreshAt = 1_800_000_050
        let c = IssuerStateTests.key(23)  // no receipt to refresh
        for k in [a, b, c] { #expect(try await state.insertKey(k) == true) }
        #expect(try await state.key(a.keyId, appId: app) == a, "metric, not-before and refresh time round-trip")
        #expect(try await state.key(c.keyId, appId: app) == c)

        #expect(try await state.keysDueForRefresh(now: 1_800_000_000, limit: 10).isEmpty)
        #expect(try await state.keysDueForRefresh(now: 1_800_000_100, limit: 10).map(\.keyId) == [b.keyId, a.keyId])
        #expect(try await state.keysDueForRefresh(now: 1_800_000_100, limit: 1).map(\.keyId) == [b.keyId])

        #expect(try await state.storeReceipt(b.keyId, appId: app, receipt: [9, 9], riskMetric: 4, notBefore: 1_800_086_400,
                                             refreshAt: 1_800_086_400) == true)
        let refreshed = try #require(try await state.key(b.keyId, appId: app))
        #expect((refreshed.receipt, refreshed.riskMetric, refreshed.receiptNotBefore, refreshed.receiptRefreshAt)
                == ([9, 9], 4, 1_800_086_400, 1_800_086_400))
        #expect(refreshed.counter == b.counter, "the counter is untouched")
        #expect(try await state.keysDueForRefresh(now: 1_800_000_100, limit: 10).map(\.keyId) == [a.keyId])

        #expect(try await state.scheduleRefresh(a.keyId, appId: app, at: nil) == true)
        #expect(try await state.keysDueForRefresh(now: 1_900_000_000, limit: 10).map(\.keyId) == [b.keyId])
        #expect(try await state.key(a.keyId, appId: app)?.receipt == a.receipt, "a schedule change keeps the receipt")
        #expect(try await state.scheduleRefresh(a.keyId, appId: app, at: 1_800_000_200) == true)
        #expect(try await state.keysDueForRefresh(now: 1_900_000_000, limit: 10).map(\.keyId) == [a.keyId, b.keyId])

        #expect(try await state.storeReceipt(a.keyId, appId: "1:123456789012:ios:ffff", receipt: [1], riskMetric: 1,
                                             notBefore: nil, refreshAt: nil) == false, "another app's key is not touched")
        #expect(try await state.scheduleRefresh([UInt8](repeating: 99, count: 32), appId: app, at: 1) == false)
        #expect(try await state.key(a.keyId, appId: app)?.riskMetric == 2)
    }

    /// `claimRefresh` on two handles of one store (`a` and `b`: the same object in memory, two connections to one
    /// SQLite file or one Redis): a due key is claimed once; a key not due, of another app or unknown, never; after
    /// the refresh is stored and released the key is claimed again only when it comes due again.
    static func exerciseClaims(_ a: IssuerReceiptState, _ b: IssuerReceiptState) async throws {
        var k = IssuerStateTests.key(31)
        k.receiptRefreshAt = 1_800_000_000
        var later = IssuerStateTests.key(32)
        later.receiptRefreshAt = 1_900_000_000
        #expect(try await a.insertKey(k))
        #expect(try await a.insertKey(later))
        let now = 1_800_000_100.0
        #expect(try await b.claimRefresh(k.keyId, appId: app, now: now, leaseUntil: now + 600) == true)
        #expect(try await a.claimRefresh(k.keyId, appId: app, now: now, leaseUntil: now + 600) == false, "claimed once")
        #expect(try await b.claimRefresh(k.keyId, appId: app, now: now, leaseUntil: now + 600) == false, "even by the same one")
        #expect(try await a.key(k.keyId, appId: app)?.receiptRefreshAt == now + 600, "leased")
        #expect(try await a.keysDueForRefresh(now: now, limit: 10).isEmpty)
        #expect(try await a.claimRefresh(later.keyId, appId: app, now: now, leaseUntil: now + 600) == false, "not due")
        #expect(try await a.claimRefresh(k.keyId, appId: "1:123456789012:ios:ffff", now: now + 700, leaseUntil: now + 1300) == false)
        #expect(try await a.claimRefresh([UInt8](repeating: 99, count: 32), appId: app, now: now, leaseUntil: now + 600) == false)

        // The claimer stores Apple's receipt (next refresh a day later) and releases: nobody may claim it now...
        #expect(try await b.storeReceipt(k.keyId, appId: app, receipt: [7], riskMetric: 2, notBefore: nil, refreshAt: now + 86_400))
        try await b.releaseRefreshClaim(k.keyId, appId: app)
        #expect(try await a.claimRefresh(k.keyId, appId: app, now: now + 1, leaseUntil: now + 601) == false, "already refreshed")
        // ...and the other handle, once it is due again.
        #expect(try await a.claimRefresh(k.keyId, appId: app, now: now + 86_400, leaseUntil: now + 87_000) == true)
        try await a.releaseRefreshClaim(k.keyId, appId: app)
        #expect(try await a.key(k.keyId, appId: app)?.riskMetric == 2, "a claim keeps the receipt")

        // A refresh pause one handle records is the other's (issue 39), per app, until cleared.
        let until = Date().timeIntervalSince1970 + 120
        #expect(try await b.refreshPause(appId: app) == nil)
        try await a.setRefreshPause(appId: app, ReceiptRefreshPause(until: until, length: 120))
        #expect(try await b.refreshPause(appId: app) == ReceiptRefreshPause(until: until, length: 120))
        #expect(try await b.refreshPause(appId: "1:123456789012:ios:ffff") == nil, "per app")
        try await b.setRefreshPause(appId: app, nil)
        #expect(try await a.refreshPause(appId: app) == nil)
    }

    @Test func claimsAreAtomicInEveryStore() async throws {
        let memory = MemoryIssuerState()
        try await Self.exerciseClaims(memory, memory)

        let path = IssuerStateTests.temporaryPath()
        defer { IssuerStateTests.remove(path) }
        try await Self.exerciseClaims(try SQLiteIssuerState(path: path), try SQLiteIssuerState(path: path))

        let server = try RedisServerProcess()
        defer { server.stop() }
        let a = try IssuerStateTests.redisState(server), b = try IssuerStateTests.redisState(server)
        defer { a.close(); b.close() }
        try await Self.exerciseClaims(a, b)
        #expect(try server.cli(["KEYS", "appcheck:issuer:rc:*"]).trimmingCharacters(in: .whitespacesAndNewlines).isEmpty,
                "released claims leave no key")
    }

    @Test func memory() async throws {
        try await Self.exercise(MemoryIssuerState())
    }

    @Test func sqliteSurvivesReopeningAndMigratesOldFiles() async throws {
        let path = IssuerStateTests.temporaryPath()
        defer { IssuerStateTests.remove(path) }
        try await Self.exercise(try SQLiteIssuerState(path: path))
        let reopened = try SQLiteIssuerState(path: path)
        #expect(try await reopened.key(IssuerStateTests.key(22).keyId, appId: Self.app)?.riskMetric == 4)
        #expect(try await reopened.keysDueForRefresh(now: 1_900_000_000, limit: 10).count == 2)

        let old = IssuerStateTests.temporaryPath()
        defer { IssuerStateTests.remove(old) }
        let keyHex = String(repeating: "07", count: 32), pubHex = "04" + String(repeating: "07", count: 64)
        let made = try BoundedCommand.run("/usr/bin/sqlite3", [old, """
            CREATE TABLE attested_keys (key_id BLOB NOT NULL, app_id TEXT NOT NULL, public_key BLOB NOT NULL,
                counter INTEGER NOT NULL, environment TEXT NOT NULL, receipt BLOB NOT NULL, attested_at REAL NOT NULL,
                counter_window INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (key_id));
            INSERT INTO attested_keys VALUES (X'\(keyHex)', '\(Self.app)', X'\(pubHex)', 0, 'production', X'010203', 1800000000, 0);
            """])
        #expect(made.status == 0, "\(made)")
        let migrated = try SQLiteIssuerState(path: old)
        #expect(try await migrated.key(IssuerStateTests.key(7).keyId, appId: Self.app) == IssuerStateTests.key(7),
                "an old key has no metric and is never due")
        #expect(try await migrated.keysDueForRefresh(now: 2_000_000_000, limit: 10).isEmpty)
        #expect(try await migrated.storeReceipt(IssuerStateTests.key(7).keyId, appId: Self.app, receipt: [5], riskMetric: 1,
                                                notBefore: nil, refreshAt: 5) == true)
        #expect(try await migrated.key(IssuerStateTests.key(7).keyId, appId: Self.app)?.riskMetric == 1)
    }

    @Test func redisSurvivesReopeningAndReadsOldHashes() async throws {
        let server = try RedisServerProcess()
        defer { server.stop() }
        let state = try IssuerStateTests.redisState(server)
        try await Self.exercise(state)
        state.close()
        let reopened = try IssuerStateTests.redisState(server)
        defer { reopened.close() }
        #expect(try await reopened.key(IssuerStateTests.key(22).keyId, appId: Self.app)?.riskMetric == 4)
        #expect(try await reopened.keysDueForRefresh(now: 1_900_000_000, limit: 10).count == 2)
        // A hash from before fraud risk has none of the new fields.
        let k = IssuerStateTests.key(24)
        #expect(try await reopened.insertKey(k) == true)
        _ = try server.cli(["HDEL", "appcheck:issuer:k:{" + String(repeating: "18", count: 32) + "}", "risk", "rnb", "rra"])
        #expect(try await reopened.key(k.keyId, appId: Self.app) == k)
        // A due member whose key is gone is dropped when met.
        _ = try server.cli(["DEL", "appcheck:issuer:k:{" + String(repeating: "16", count: 32) + "}"])
        #expect(try await reopened.keysDueForRefresh(now: 1_900_000_000, limit: 10).count == 1)
        #expect(try server.cli(["ZCARD", "appcheck:issuer:receipts_due"]).contains("1"))
    }
}
