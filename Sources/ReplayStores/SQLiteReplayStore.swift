import CSQLite
import CSystemShims
import EventLoop
import Foundation
import JSONLog
import Synchronization

/// `replay.store: sqlite` — durable on one host; several gateway processes on the host may share the file.
///
/// - File: `replay(key BLOB PRIMARY KEY, expires_at INTEGER) WITHOUT ROWID` plus an index on `expires_at`
///   for pruning. `expires_at` is unix seconds, rounded up (an entry is never freed early). The parent
///   directory is created (0750) when missing; a file that cannot be opened or is not a usable database is
///   a start-up error naming the path.
/// - Durability: WAL with `synchronous=NORMAL`. A commit is in the WAL (the OS page cache) before the
///   answer is posted, so a consumed token stays consumed after `kill -9` of any gateway process; a power cut
///   or kernel crash may lose the last commits (FULL would fsync every group commit to close that window).
/// - Sharing: `busy_timeout` (2 s) and `BEGIN IMMEDIATE`, so writers of several processes queue for the lock
///   instead of failing; the loop-side timeout still answers within `timeout`.
/// - Threads: nothing touches SQLite on a loop thread. A dedicated writer thread takes everything queued
///   and group-commits it as one transaction of upserts (`INSERT … ON CONFLICT(key) DO UPDATE … WHERE the
///   existing row expired`, one changed row = consumed), then posts the answers back with one
///   `EventLoop.execute` per loop. A failed statement or commit rolls the batch back and answers all of it
///   `.unavailable`. Expired rows are deleted every `pruneInterval` in batches of 1000.
/// - Timeout: enforced on the loop side; a late answer is ignored. (A late *successful* insert means the token
///   was consumed while the client got 503 — fail closed.)
public final class SQLiteReplayStore: ReplayStore, @unchecked Sendable {
    struct Request {
        var key: [UInt8]
        var expiresAt: Int64
        var client: LoopBound<SQLiteReplayClient>
        var id: UInt64
    }

    enum Job {
        case consume(Request)
        /// Runs on the writer thread with the connection (tests, `count`).
        case task(@Sendable (OpaquePointer) -> Void)
    }

    public let path: String
    let timeout: Double
    let pruneInterval: Double
    private let logSink: LogSink
    public let counters = ReplayCounters()
    static let maxBatch = 1024
    static let pruneBatch = 1000
    static let busyTimeoutMs: Int32 = 2000

    // Shared with the writer thread, under `cond`.
    private let cond = NSCondition()
    private var queue: [Job] = []
    private var closing = false
    private var writerExited = false

    private let problem = Mutex<String?>(nil)
    /// Monotonic ns when the batch in progress started; 0 when the writer is idle.
    private let batchStartedAt = Atomic<UInt64>(0)
    private let exited = DispatchSemaphore(value: 0)

    // Owned by the writer thread after init.
    private var db: OpaquePointer?
    private var insertStmt: OpaquePointer?
    private var pruneStmt: OpaquePointer?

    /// Opens (creating when needed) the database and starts the writer thread.
    /// - Parameter pruneInterval: seconds between deletions of expired rows (also the readiness probe).
    public init(path: String, timeout: Double, logSink: LogSink, pruneInterval: Double = 5) throws {
        self.path = path
        self.timeout = timeout
        self.pruneInterval = pruneInterval
        self.logSink = logSink
        try open()
        let thread = Thread { [self] in self.writerLoop() }
        thread.name = "replay-sqlite"
        thread.start()
    }

    private func open() throws {
        let dir = (path as NSString).deletingLastPathComponent
        if !dir.isEmpty && !FileManager.default.fileExists(atPath: dir) {
            do {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o750])
            } catch {
                throw ReplayStoreError("replay.sqlite_path: cannot create directory \(dir): \(error.localizedDescription)")
            }
        }
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nil)
        guard rc == SQLITE_OK, let handle else {
            let msg = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(handle)
            throw ReplayStoreError("replay.sqlite_path: cannot open \(path): \(msg)")
        }
        db = handle
        sqlite3_busy_timeout(handle, Self.busyTimeoutMs)
        do {
            let mode = try queryText("PRAGMA journal_mode=WAL")
            guard mode.lowercased() == "wal" else { throw ReplayStoreError("journal_mode is \(mode), WAL unavailable") }
            try exec("PRAGMA synchronous=NORMAL")
            try exec("CREATE TABLE IF NOT EXISTS replay(key BLOB PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID")
            try exec("CREATE INDEX IF NOT EXISTS replay_expires_at ON replay(expires_at)")
            insertStmt = try prepare("""
                INSERT INTO replay(key, expires_at) VALUES(?1, ?2)
                ON CONFLICT(key) DO UPDATE SET expires_at = excluded.expires_at WHERE replay.expires_at <= ?3
                """)
            pruneStmt = try prepare("DELETE FROM replay WHERE key IN (SELECT key FROM replay WHERE expires_at <= ?1 LIMIT \(Self.pruneBatch))")
        } catch {
            closeDatabase()
            throw ReplayStoreError("replay.sqlite_path: cannot use \(path): \(error)")
        }
    }

    // MARK: ReplayStore

    public func makeClient(for loop: EventLoop) -> ReplayClient {
        SQLiteReplayClient(store: self, loop: loop)
    }

    public func readinessProblem() -> String? {
        cond.lock()
        let isClosed = closing
        cond.unlock()
        if isClosed { return "sqlite: closed" }
        let started = batchStartedAt.load(ordering: .relaxed)
        if started != 0 {
            let age = CSystemShims_monotonic_ns() &- started
            if age > UInt64.nanoseconds(max(1, timeout * 4)) { return "sqlite: writer stalled for \(age / 1_000_000) ms" }
        }
        return problem.withLock { $0 }
    }

    public func close() {
        cond.lock()
        if closing { cond.unlock(); return }
        closing = true
        cond.signal()
        cond.unlock()
        exited.wait()
    }

    /// Rows in the table (including expired ones not yet pruned). Blocks the caller until the writer
    /// thread answers: for tests only, never on a loop thread. -1 when closed or on error.
    public var count: Int {
        let box = Mutex<Int>(-1)
        let done = DispatchSemaphore(value: 0)
        guard enqueue(.task({ db in
            var stmt: OpaquePointer?
            if sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM replay", -1, &stmt, nil) == SQLITE_OK, sqlite3_step(stmt) == SQLITE_ROW {
                let n = Int(sqlite3_column_int64(stmt, 0))
                box.withLock { $0 = n }
            }
            sqlite3_finalize(stmt)
            done.signal()
        })) else { return -1 }
        done.wait()
        return box.withLock { $0 }
    }

    /// Queues a job; false when the store is closed.
    func enqueue(_ job: Job) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        if closing { return false }
        queue.append(job)
        if queue.count == 1 { cond.signal() }
        return true
    }

    // MARK: writer thread

    private func writerLoop() {
        var nextPrune = Date().addingTimeInterval(pruneInterval)
        while true {
            cond.lock()
            while queue.isEmpty && !closing {
                if !cond.wait(until: nextPrune) { break }
            }
            let n = min(queue.count, Self.maxBatch)
            let jobs = Array(queue.prefix(n))
            queue.removeFirst(n)
            let stop = closing && queue.isEmpty
            cond.unlock()

            if !jobs.isEmpty { run(jobs) }
            if stop { break }
            if Date() >= nextPrune {
                prune()
                nextPrune = Date().addingTimeInterval(pruneInterval)
            }
        }
        closeDatabase()
        exited.signal()
    }

    private func run(_ jobs: [Job]) {
        var requests: [Request] = []
        requests.reserveCapacity(jobs.count)
        for job in jobs {
            switch job {
            case .consume(let r): requests.append(r)
            case .task(let body): if let db { body(db) }
            }
        }
        guard !requests.isEmpty else { return }
        batchStartedAt.store(CSystemShims_monotonic_ns(), ordering: .relaxed)
        let results = insertBatch(requests)
        batchStartedAt.store(0, ordering: .relaxed)
        post(requests, results)
    }

    /// One transaction for the whole batch; every result `.unavailable` when anything fails.
    private func insertBatch(_ requests: [Request]) -> [ReplayResult] {
        guard let db, let stmt = insertStmt else { return requests.map { _ in .unavailable("closed") } }
        let now = Int64(replayWallClock().rounded(.down))
        do {
            try exec("BEGIN IMMEDIATE")
        } catch {
            setProblem("sqlite: \(error)")
            return requests.map { _ in .unavailable("sqlite: \(error)") }
        }
        var results: [ReplayResult] = []
        results.reserveCapacity(requests.count)
        var failure: String?
        for r in requests {
            sqlite3_reset(stmt)
            _ = r.key.withUnsafeBytes { sqlite3_bind_blob(stmt, 1, $0.baseAddress, Int32($0.count), CSQLite_TRANSIENT()) }
            sqlite3_bind_int64(stmt, 2, r.expiresAt)
            sqlite3_bind_int64(stmt, 3, now)
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE {
                results.append(sqlite3_changes(db) == 1 ? .consumed : .reused)
            } else {
                failure = String(cString: sqlite3_errmsg(db))
                break
            }
        }
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
        if failure == nil {
            do { try exec("COMMIT") } catch { failure = "\(error)" }
        }
        if let failure {
            _ = try? exec("ROLLBACK")
            setProblem("sqlite: \(failure)")
            logSink.error("replay store transaction failed", [("store", "sqlite"), ("error", .string(failure))])
            return requests.map { _ in .unavailable("sqlite: \(failure)") }
        }
        setProblem(nil)
        return results
    }

    /// Posts the answers: one `execute` per event loop.
    private func post(_ requests: [Request], _ results: [ReplayResult]) {
        var byLoop: [ObjectIdentifier: (EventLoop, [(LoopBound<SQLiteReplayClient>, UInt64, ReplayResult)])] = [:]
        for (r, result) in zip(requests, results) {
            let loop = r.client.value.loop
            byLoop[ObjectIdentifier(loop), default: (loop, [])].1.append((r.client, r.id, result))
        }
        for (_, (loop, answers)) in byLoop {
            let box = AnswerBox(answers)
            loop.execute { for (c, id, result) in box.answers { c.value.finish(id, result) } }
        }
    }

    private struct AnswerBox: @unchecked Sendable {
        let answers: [(LoopBound<SQLiteReplayClient>, UInt64, ReplayResult)]
        init(_ a: [(LoopBound<SQLiteReplayClient>, UInt64, ReplayResult)]) { answers = a }
    }

    /// Deletes expired rows in bounded batches, yielding to queued requests between batches.
    private func prune() {
        guard let db, let stmt = pruneStmt else { return }
        let now = Int64(replayWallClock().rounded(.down))
        for _ in 0..<20 {
            sqlite3_reset(stmt)
            sqlite3_bind_int64(stmt, 1, now)
            let rc = sqlite3_step(stmt)
            sqlite3_reset(stmt)
            guard rc == SQLITE_DONE else {
                let msg = String(cString: sqlite3_errmsg(db))
                setProblem("sqlite: \(msg)")
                logSink.warning("replay store prune failed", [("store", "sqlite"), ("error", .string(msg))])
                return
            }
            setProblem(nil)
            if sqlite3_changes(db) < Self.pruneBatch { return }
            cond.lock()
            let busy = !queue.isEmpty
            cond.unlock()
            if busy { return }
        }
    }

    private func setProblem(_ text: String?) {
        problem.withLock { $0 = text }
    }

    private func closeDatabase() {
        // Fail whatever was still queued.
        cond.lock()
        let left = queue
        queue.removeAll()
        cond.unlock()
        let reqs = left.compactMap { job -> Request? in if case .consume(let r) = job { return r } else { return nil } }
        post(reqs, reqs.map { _ in .unavailable("closed") })
        for case .task(let body) in left { if let db { body(db) } }
        sqlite3_finalize(insertStmt)
        sqlite3_finalize(pruneStmt)
        insertStmt = nil
        pruneStmt = nil
        sqlite3_close_v2(db)
        db = nil
    }

    // MARK: helpers (writer thread or init)

    private func exec(_ sql: String) throws {
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let msg = err.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(err)
            throw ReplayStoreError(msg)
        }
    }

    private func queryText(_ sql: String) throws -> String {
        let stmt = try prepare(sql)
        defer { sqlite3_finalize(stmt) }
        guard sqlite3_step(stmt) == SQLITE_ROW, let text = sqlite3_column_text(stmt, 0) else {
            throw ReplayStoreError(String(cString: sqlite3_errmsg(db)))
        }
        return String(cString: text)
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw ReplayStoreError(String(cString: sqlite3_errmsg(db)))
        }
        return stmt
    }
}

/// Loop-confined SQLite client: hands requests to the writer thread and matches the answers posted back.
final class SQLiteReplayClient: ReplayClient {
    let store: SQLiteReplayStore
    let loop: EventLoop
    private let pending = PendingOps<ReplayResult>()
    private var timer: LoopTimer?

    init(store: SQLiteReplayStore, loop: EventLoop) {
        self.store = store
        self.loop = loop
    }

    /// `issuedAt` is not needed: the SQLite file is durable (it survives restarts and crashes), so the store
    /// never loses what it knew and has no moment before which tokens must be refused.
    func consume(key: [UInt8], expiresAt: Double, issuedAt: Double, completion: @escaping (ReplayResult) -> Void) {
        guard key.count == 32, expiresAt.isFinite else {
            complete(completion, .unavailable("bad key"))
            return
        }
        let id = pending.add(deadline: loop.now + .nanoseconds(store.timeout), completion: completion)
        let expires = Int64(min(expiresAt.rounded(.up), 9_000_000_000_000))
        let request = SQLiteReplayStore.Request(key: key, expiresAt: expires, client: LoopBound(self), id: id)
        guard store.enqueue(.consume(request)) else {
            if let c = pending.take(id) { complete(c, .unavailable("closed")) }
            return
        }
        armTimer()
    }

    /// An answer from the writer thread (on the loop thread); ignored when the operation already timed out.
    func finish(_ id: UInt64, _ result: ReplayResult) {
        if let c = pending.take(id) { complete(c, result) }
        armTimer()
    }

    private func complete(_ c: (ReplayResult) -> Void, _ result: ReplayResult) {
        store.counters.record(result)
        c(result)
    }

    private func armTimer() {
        guard let deadline = pending.nextDeadline else {
            if let timer { loop.cancel(timer) }
            return
        }
        let t = timer ?? LoopTimer { [weak self] in self?.timerFired() }
        timer = t
        if !t.isArmed || t.deadline != deadline { loop.schedule(t, at: deadline) }
    }

    private func timerFired() {
        for c in pending.takeExpired(now: loop.now) { complete(c, .unavailable("timeout")) }
        armTimer()
    }
}
