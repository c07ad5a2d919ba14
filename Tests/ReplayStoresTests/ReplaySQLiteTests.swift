import EventLoop
import Foundation
import JSONLog
import Testing
import TestSupport
@testable import ReplayStores

@Suite struct ReplaySQLiteTests {
    let dir: String

    init() throws {
        dir = NSTemporaryDirectory() + "replay-sqlite-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    func open(_ path: String, timeout: Double = 2, prune: Double = 5) throws -> SQLiteReplayStore {
        try SQLiteReplayStore(path: path, timeout: timeout, logSink: LogSink(fd: 2, level: .error), pruneInterval: prune)
    }

    func openError(_ path: String) -> String? {
        do {
            let s = try open(path)
            s.close()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func firstUseConsumedSecondReused() throws {
        let t = try ReplayTestLoop()
        defer { t.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let store = try open(dir + "/sub/dir/replay.sqlite") // parent directories are created
        defer { store.close() }
        let client = store.makeClient(for: t.loop)
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
        // Several in one batch, including a duplicate inside the batch.
        let k2 = ReplayTest.randomKey(), k3 = ReplayTest.randomKey()
        let batch = ReplayTest.consume(client, on: t.loop, keys: [k2, k3, k2, k], expiresAt: ReplayTest.later())
        #expect(batch == [.consumed, .consumed, .reused, .reused])
        #expect(store.count == 3)
        #expect(store.counters.consumed == 3)
        #expect(store.counters.reused == 3)
        #expect(store.readinessProblem() == nil)
    }

    @Test func fiftyConcurrentConsumesFromTwoStoresOnOneFileGiveExactlyOneConsumed() throws {
        let a = try ReplayTestLoop("a"), b = try ReplayTestLoop("b")
        defer { a.stop(); b.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/replay.sqlite"
        // Two store instances = two connections, like two gateway processes sharing the file.
        let s1 = try open(path), s2 = try open(path)
        defer { s1.close(); s2.close() }
        let results = ReplayTest.race([(s1.makeClient(for: a.loop), a.loop), (s2.makeClient(for: b.loop), b.loop)],
                                      key: ReplayTest.randomKey())
        #expect(results.count == 50)
        #expect(results.filter { $0 == .consumed }.count == 1)
        #expect(results.filter { $0 == .reused }.count == 49)
        // And each sees the other's consumption.
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(s1.makeClient(for: a.loop), on: a.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(s2.makeClient(for: b.loop), on: b.loop, key: k) == .reused)
    }

    @Test func expiryFreesRows() throws {
        let t = try ReplayTestLoop()
        defer { t.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let store = try open(dir + "/replay.sqlite", prune: 0.2)
        defer { store.close() }
        let client = store.makeClient(for: t.loop)
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k, expiresAt: ReplayTest.later(1)) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey()) == .consumed)
        #expect(store.count == 2)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
        // Expiry is kept in whole seconds rounded up: gone within ~2 s plus one prune interval.
        #expect(ReplayTest.eventually(6) { store.count == 1 })
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
    }

    @Test func expiredRowStillPresentCountsAsFree() throws {
        let t = try ReplayTestLoop()
        defer { t.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let store = try open(dir + "/replay.sqlite", prune: 3600) // no pruning during the test
        defer { store.close() }
        let client = store.makeClient(for: t.loop)
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k, expiresAt: ReplayTest.later(-5)) == .consumed)
        #expect(store.count == 1)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .consumed)
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: k) == .reused)
    }

    @Test func consumedKeysSurviveCloseAndReopen() throws {
        let t = try ReplayTestLoop()
        defer { t.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/replay.sqlite"
        let k = ReplayTest.randomKey()
        do {
            let store = try open(path)
            #expect(ReplayTest.consumeOne(store.makeClient(for: t.loop), on: t.loop, key: k) == .consumed)
            store.close()
        }
        let again = try open(path)
        defer { again.close() }
        #expect(ReplayTest.consumeOne(again.makeClient(for: t.loop), on: t.loop, key: k) == .reused)
    }

    /// What `kill -9` leaves on disk: the database and WAL files as they are while the store is open and
    /// nothing was checkpointed. Copying them is the crash image; opening the copy must refuse the replay.
    @Test func consumedKeysSurviveACrashImageWithoutCheckpoint() throws {
        let t = try ReplayTestLoop()
        defer { t.stop(); try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/replay.sqlite"
        let store = try open(path)
        defer { store.close() }
        let k = ReplayTest.randomKey()
        #expect(ReplayTest.consumeOne(store.makeClient(for: t.loop), on: t.loop, key: k) == .consumed)
        let fm = FileManager.default
        #expect(fm.fileExists(atPath: path + "-wal"))
        let crash = dir + "/crash.sqlite"
        try fm.copyItem(atPath: path, toPath: crash)
        try fm.copyItem(atPath: path + "-wal", toPath: crash + "-wal")
        let recovered = try open(crash)
        defer { recovered.close() }
        #expect(ReplayTest.consumeOne(recovered.makeClient(for: t.loop), on: t.loop, key: k) == .reused)
        #expect(recovered.count == 1)
    }

    @Test func unusablePathIsAClearError() throws {
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A directory where the file should be.
        let asDir = dir + "/is-a-dir"
        try FileManager.default.createDirectory(atPath: asDir, withIntermediateDirectories: true)
        let e1 = openError(asDir)
        #expect(e1?.contains("replay.sqlite_path") == true && e1?.contains(asDir) == true, "\(e1 ?? "opened")")
        // A parent that cannot be created (a regular file in the way).
        _ = FileManager.default.createFile(atPath: dir + "/file", contents: Data())
        let e2 = openError(dir + "/file/replay.sqlite")
        #expect(e2?.contains("replay.sqlite_path") == true, "\(e2 ?? "opened")")
        // Not a database.
        _ = FileManager.default.createFile(atPath: dir + "/garbage", contents: Data(repeating: 0x41, count: 4096))
        let e3 = openError(dir + "/garbage")
        #expect(e3?.contains(dir + "/garbage") == true, "\(e3 ?? "opened")")
    }

    @Test func closedStoreAnswersUnavailable() throws {
        let t = try ReplayTestLoop()
        defer { t.stop(); try? FileManager.default.removeItem(atPath: dir) }
        var s = ReplaySettings()
        s.store = .sqlite
        s.sqlitePath = dir + "/replay.sqlite"
        let store = try makeReplayStore(s, logSink: LogSink(fd: 2, level: .error))
        let client = store.makeClient(for: t.loop)
        store.close()
        #expect(ReplayTest.consumeOne(client, on: t.loop, key: ReplayTest.randomKey()) == .unavailable("closed"))
        #expect(store.counters.errors == 1)
        #expect(store.readinessProblem() == "sqlite: closed")
    }
}
