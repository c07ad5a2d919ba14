import AppCheck
import Foundation
import GatewayTools
import Glibc
import JSONLog
import Testing
@testable import KeySets

/// Keys, settings and bounded waits shared by the key-set tests. Keys are generated once per run.
enum KeySetFixtures {
    static let keys: [RSAPublicKey] = (0..<3).compactMap { _ in try? RSAPrivateKey.generate(bits: 2048).publicKey }

    static func key(_ i: Int) throws -> RSAPublicKey {
        try #require(keys.count == 3, "RSA key generation failed")
        return keys[i]
    }

    /// A JWKS document publishing key `i` under `kids[i]`.
    static func document(_ kids: [String]) throws -> String {
        try JWKSet.document(for: kids.enumerated().map { ($0.element, try key($0.offset)) })
    }

    /// Logs go nowhere (the provider's lines are checked by hand when debugging).
    static let log = LogSink(fd: open("/dev/null", O_WRONLY | O_CLOEXEC))

    static func settings(url: String, maxAge: Double = 3600, unknownKidInterval: Double = 60, maxStale: Double = 3600,
                         cacheFile: String = "") -> JWKSSettings {
        var s = JWKSSettings()
        s.url = url
        s.maxAge = maxAge
        s.unknownKidRefreshInterval = unknownKidInterval
        s.maxStale = maxStale
        s.cacheFile = cacheFile
        return s
    }

    /// A provider with fast retries (0.1 s doubling to 0.4 s) over the real HTTP client.
    static func provider(_ settings: JWKSSettings, caFile: String? = nil) -> KeySetProvider {
        let client = BlockingHTTPClient(timeout: 5, caFile: caFile)
        return KeySetProvider(settings: settings, log: log, fetcher: { try client.get($0) },
                              retry: .init(initial: 0.1, maximum: 0.4))
    }

    /// Polls `condition` every 10 ms until it holds or `timeout` seconds pass; returns whether it held.
    static func waitUntil(_ timeout: Double = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "keyset-tests-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// Collects snapshots delivered to a subscriber.
final class SnapshotRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [KeySetSnapshot] = []
    func record(_ s: KeySetSnapshot) { lock.lock(); list.append(s); lock.unlock() }
    var snapshots: [KeySetSnapshot] { lock.lock(); defer { lock.unlock() }; return list }
}

/// `KeySetProvider` end to end over real HTTP against `KeySetServer` (docs/behaviour.md, key set; docs/operations.md).
@Suite struct KeySetProviderTests {
    @Test func initialFetchMakesItReadyWithTheKids() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["k1", "k2"]))
        defer { server.stop() }
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url))
        defer { provider.stop() }
        #expect(!provider.isReady)
        let recorder = SnapshotRecorder()
        provider.subscribe { recorder.record($0) }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        let snapshot = try #require(provider.current)
        #expect(snapshot.set.kids == ["k1", "k2"])
        #expect(snapshot.source == .network)
        #expect(snapshot.lifetime == 3600)
        #expect(snapshot.usable(at: Date()))
        #expect(!snapshot.isStale(at: Date()))
        let status = provider.status
        #expect(status.isReady && status.keyCount == 2 && status.kids == ["k1", "k2"])
        #expect(status.successfulFetches == 1 && status.failedFetches == 0 && status.lastError == nil)
        #expect(try #require(status.ageSeconds) < 5)
        #expect(server.fetchCount == 1)
        #expect(KeySetFixtures.waitUntil { recorder.snapshots.count == 1 })
        #expect(recorder.snapshots.first === snapshot)

        // A late subscriber gets the current snapshot at once.
        let late = SnapshotRecorder()
        provider.subscribe { late.record($0) }
        #expect(late.snapshots.count == 1 && late.snapshots.first === snapshot)
    }

    @Test func notReadyWhileTheServerIsDownThenReadyOnceItIsUp() throws {
        let probe = try KeySetServer()
        let port = probe.port
        probe.stop()
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: "http://127.0.0.1:\(port)/jwks"))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.status.failedFetches >= 2 })
        #expect(!provider.isReady)
        #expect(provider.current == nil)
        #expect(provider.lastError?.contains("connection refused") == true)

        let server = try KeySetServer(document: try KeySetFixtures.document(["late"]), port: port)
        defer { server.stop() }
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(provider.current?.set.kids == ["late"])
        #expect(provider.lastError == nil)
    }

    @Test func cacheControlMaxAgeIsHonoured() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["k1"]))
        defer { server.stop() }
        server.setCacheControl("public, max-age=1")
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, maxAge: 3600))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(provider.current?.lifetime == 1)
        // Refreshed before the 1 s lifetime ends, in the background.
        #expect(KeySetFixtures.waitUntil(5) { server.fetchCount >= 2 })
        #expect(KeySetFixtures.waitUntil { provider.status.successfulFetches >= 2 })
    }

    @Test func configuredMaxAgeCapsALongerCacheControl() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["k1"]))
        defer { server.stop() }
        server.setCacheControl("max-age=3600")
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, maxAge: 1))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(provider.current?.lifetime == 1)
        #expect(KeySetFixtures.waitUntil(5) { server.fetchCount >= 2 })
    }

    @Test func noStoreKeepsTheSetForTheUnknownKidInterval() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["k1"]))
        defer { server.stop() }
        server.setCacheControl("no-store")
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, maxAge: 3600, unknownKidInterval: 30))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(provider.current?.lifetime == 30)
    }

    @Test func unknownKidBurstFetchesAtMostOnce() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["k1"]))
        defer { server.stop() }
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, unknownKidInterval: 60))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(server.fetchCount == 1)
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for i in 0..<250 { provider.unknownKid("unknown-\(worker)-\(i)") }
        }
        #expect(KeySetFixtures.waitUntil { provider.status.successfulFetches == 2 })
        // An observation window for a (wrong) third fetch; not synchronisation.
        usleep(300_000)
        #expect(server.fetchCount <= 2)
        #expect(provider.status.successfulFetches + provider.status.failedFetches <= 2)
    }

    @Test func keyRotationIsPickedUpOnUnknownKid() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["old"]))
        defer { server.stop() }
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url))
        defer { provider.stop() }
        let recorder = SnapshotRecorder()
        provider.subscribe { recorder.record($0) }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(provider.current?.set.key(for: "new") == nil)

        server.setDocument(try KeySetFixtures.document(["old", "new"]))
        provider.unknownKid("new")
        #expect(KeySetFixtures.waitUntil { provider.current?.set.key(for: "new") != nil })
        #expect(provider.current?.set.kids == ["old", "new"])
        #expect(KeySetFixtures.waitUntil { recorder.snapshots.last?.set.kids == ["old", "new"] })
        #expect(recorder.snapshots.count == 2)
    }

    @Test func staleSetServesWithinMaxStaleThenBecomesUnusable() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["k1"]))
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, maxAge: 1, maxStale: 1))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        server.stop()
        let snapshot = try #require(provider.current)

        // Past its lifetime, refreshes failing, still served.
        #expect(KeySetFixtures.waitUntil(5) {
            let now = Date()
            guard let current = provider.current else { return false }
            return current.isStale(at: now) && current.usable(at: now) && provider.status.failedFetches >= 1
        })
        #expect(provider.isReady)
        #expect(provider.status.isStale)
        // Then beyond max_stale: unusable, not ready.
        #expect(KeySetFixtures.waitUntil(5) { !provider.isReady })
        let last = try #require(provider.current)
        #expect(!last.usable(at: Date()))
        #expect(last.fetchedAt >= snapshot.fetchedAt)
        #expect(provider.lastError != nil)
        #expect(!provider.status.isReady)
    }

    @Test func snapshotUsabilityBoundaries() throws {
        let set = JWKSet(keys: [("k", try KeySetFixtures.key(0))])
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        let s = KeySetSnapshot(set: set, fetchedAt: t0, lifetime: 10, maxStale: 5, source: .network)
        #expect(s.usable(at: t0) && !s.isStale(at: t0))
        #expect(s.usable(at: t0 + 9.999) && !s.isStale(at: t0 + 9.999))
        #expect(s.usable(at: t0 + 10) && s.isStale(at: t0 + 10))
        #expect(s.usable(at: t0 + 14.999))
        #expect(!s.usable(at: t0 + 15))
        #expect(s.age(at: t0 + 3) == 3)
    }

    @Test func cacheFileIsWrittenAtomicallyAndLoadedWhileTheServerIsDown() throws {
        let dir = try KeySetFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = dir + "/jwks.json"
        let document = try KeySetFixtures.document(["cached1", "cached2"])
        let server = try KeySetServer(document: document)
        let first = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, cacheFile: cache))
        first.start()
        #expect(KeySetFixtures.waitUntil { first.isReady })
        #expect(KeySetFixtures.waitUntil { FileManager.default.fileExists(atPath: cache) })
        first.stop()
        server.stop()
        #expect(try String(contentsOfFile: cache, encoding: .utf8) == document)
        // Only the file itself: the temporary file was renamed over it.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["jwks.json"])

        // A restart during the outage: ready from the cache file at once.
        let second = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, cacheFile: cache))
        defer { second.stop() }
        second.start()
        #expect(second.isReady)
        let snapshot = try #require(second.current)
        #expect(snapshot.source == .cacheFile)
        #expect(snapshot.set.kids == ["cached1", "cached2"])
        #expect(snapshot.lifetime == 0)
        #expect(abs(snapshot.age(at: Date())) < 10)
        #expect(KeySetFixtures.waitUntil { second.status.failedFetches >= 1 })
        #expect(second.isReady)
        #expect(second.status.source == .cacheFile)
    }

    @Test func cacheFileOlderThanMaxStaleIsIgnored() throws {
        let dir = try KeySetFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = dir + "/jwks.json"
        try KeySetFixtures.document(["old"]).write(toFile: cache, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-120)], ofItemAtPath: cache)
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: "http://127.0.0.1:1/jwks", maxStale: 60, cacheFile: cache))
        defer { provider.stop() }
        provider.start()
        #expect(!provider.isReady)
        #expect(provider.current == nil)

        // Within max_stale measured from the mtime: used.
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-30)], ofItemAtPath: cache)
        let fresh = KeySetFixtures.provider(KeySetFixtures.settings(url: "http://127.0.0.1:1/jwks", maxStale: 60, cacheFile: cache))
        defer { fresh.stop() }
        fresh.start()
        #expect(fresh.isReady)
        let age = try #require(fresh.status.ageSeconds)
        #expect(age >= 29 && age < 40)
    }

    @Test func unparsableCacheFileIsIgnoredAndUnwritableOneIsNotFatal() throws {
        let dir = try KeySetFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = dir + "/jwks.json"
        try "{\"keys\":[]}".write(toFile: cache, atomically: true, encoding: .utf8)
        let offline = KeySetFixtures.provider(KeySetFixtures.settings(url: "http://127.0.0.1:1/jwks", cacheFile: cache))
        defer { offline.stop() }
        offline.start()
        #expect(KeySetFixtures.waitUntil { offline.status.failedFetches >= 1 })
        #expect(offline.current == nil && !offline.isReady)

        let server = try KeySetServer(document: try KeySetFixtures.document(["k1"]))
        defer { server.stop() }
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, cacheFile: cache))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        // The good document replaced the bad one.
        #expect(KeySetFixtures.waitUntil { (try? String(contentsOfFile: cache, encoding: .utf8)) == (try? KeySetFixtures.document(["k1"])) })

        let unwritable = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url, cacheFile: dir + "/missing-dir/jwks.json"))
        defer { unwritable.stop() }
        unwritable.start()
        #expect(KeySetFixtures.waitUntil { unwritable.isReady })
        #expect(unwritable.status.successfulFetches == 1)
    }

    @Test func fileURLIsFetched() throws {
        let dir = try KeySetFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/jwks.json"
        try KeySetFixtures.document(["filekey"]).write(toFile: path, atomically: true, encoding: .utf8)
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: "file://" + path, maxAge: 600))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(provider.current?.set.kids == ["filekey"])
        #expect(provider.current?.lifetime == 600)
    }

    @Test func unusableDocumentCountsAsAFailedFetch() throws {
        let server = try KeySetServer(document: "{\"keys\":[{\"kty\":\"EC\",\"kid\":\"e\"}]}")
        defer { server.stop() }
        let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: server.url))
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.status.failedFetches >= 1 })
        #expect(!provider.isReady)
        #expect(provider.lastError?.contains("no usable RS256 key") == true)

        server.setAvailable(false)
        #expect(KeySetFixtures.waitUntil { provider.lastError == "HTTP status 503" })
        server.setDocument(try KeySetFixtures.document(["k1"]))
        server.setAvailable(true)
        #expect(KeySetFixtures.waitUntil { provider.isReady })
    }

    @Test func stopIsPromptAndManyProvidersComeAndGo() throws {
        let server = try KeySetServer(document: try KeySetFixtures.document(["k1"]))
        defer { server.stop() }
        let started = Date()
        for i in 0..<20 {
            let url = i % 2 == 0 ? server.url : "http://127.0.0.1:1/jwks"
            let provider = KeySetFixtures.provider(KeySetFixtures.settings(url: url))
            provider.start()
            if i % 2 == 0 { #expect(KeySetFixtures.waitUntil { provider.isReady }) }
            provider.stop()
        }
        #expect(Date().timeIntervalSince(started) < 10)
        // Stopping a provider that never started returns at once.
        KeySetFixtures.provider(KeySetFixtures.settings(url: server.url)).stop()
    }

    @Test func retryDelayDoublesAndIsCapped() throws {
        let provider = KeySetProvider(settings: KeySetFixtures.settings(url: "file:///nonexistent"), log: KeySetFixtures.log,
                                      fetcher: { _ in throw FetchError.status(500) })
        #expect(provider.retryDelay(afterFailures: 1) == 1)
        #expect(provider.retryDelay(afterFailures: 2) == 2)
        #expect(provider.retryDelay(afterFailures: 6) == 32)
        #expect(provider.retryDelay(afterFailures: 7) == 60)
        #expect(provider.retryDelay(afterFailures: 100) == 60)
    }

    @Test func injectedFetcherDrivesTheProvider() throws {
        let document = Array(try KeySetFixtures.document(["injected"]).utf8)
        let provider = KeySetProvider(settings: KeySetFixtures.settings(url: "https://example.invalid/jwks", maxAge: 100),
                                      log: KeySetFixtures.log, fetcher: { _ in
            FetchedResponse(status: 200, headers: ResponseHeaders(fields: [("cache-control", "max-age=40")]), body: document)
        })
        defer { provider.stop() }
        provider.start()
        #expect(KeySetFixtures.waitUntil { provider.isReady })
        #expect(provider.current?.lifetime == 40)
        #expect(provider.current?.set.kids == ["injected"])
    }
}
