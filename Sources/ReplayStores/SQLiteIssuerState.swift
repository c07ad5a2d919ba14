import CSQLite
import Dispatch
import Foundation

/// `issuer.state.store: sqlite` (docs/issuer.md): durable on one host — attested keys survive restarts and
/// `kill -9` — and shareable by several gateway processes on that host (WAL, `busy_timeout`). Every "first
/// use wins" decision is atomic across processes too:
///
/// - a challenge is taken with `DELETE … RETURNING` (single use even when the exchange then fails);
/// - a challenge is put inside a `BEGIN IMMEDIATE` transaction that first counts the address's unexpired
///   challenges (index on `(address, expires_at)`) and the table's rows (`challenge_count`, kept exact by
///   triggers, so the global cap costs no `count(*)` scan per put);
/// - a key is inserted with `INSERT OR IGNORE`;
/// - an assertion counter is read, judged by `CounterWindow` and written back inside one `BEGIN IMMEDIATE`
///   transaction;
/// - a one-time input is recorded with an upsert that replaces only an expired row.
///
/// Why `BEGIN IMMEDIATE` rather than a compare-and-set `UPDATE … WHERE counter = ? AND counter_window = ?` with
/// retries: it takes the file's write lock before the read, so the read-compute-write is one serialised step
/// across processes with no retry loop to bound; waiting for another process goes through `busy_timeout` like
/// every other statement (past it: unavailable); and the challenge put needs the same count-then-insert
/// atomicity anyway. The lock is held for two indexed statements. (A deferred transaction would instead fail
/// with `SQLITE_BUSY` when upgrading its read to a write under contention.)
///
/// Files made before the counter window and the per-address challenge bound are migrated when opened
/// (`ALTER TABLE … ADD COLUMN`, inside the same transaction as the rest of the schema, so two processes opening
/// one old file do not both alter it).
///
/// Statements run on one serial queue of their own, never on an event loop or a cooperative thread; expired
/// challenges and inputs are pruned every `pruneEvery` operations, and expired challenges also when a put finds
/// the table at `maxChallenges` (at most once per second of the callers' `now`).
public final class SQLiteIssuerState: IssuerState, @unchecked Sendable {
    /// How long a statement waits for another process's write lock before the store reports unavailable.
    static let busyTimeoutMs: Int32 = 2000
    /// Rows kept at most in `challenges` (expired or not); past it, after a prune, a put is `storeFull`.
    public let maxChallenges: Int
    private let pruneEvery = 1024
    private let queue = DispatchQueue(label: "appcheck-gateway.issuer-sqlite")
    // Touched only on `queue`.
    private var db: OpaquePointer?
    private var writes = 0
    private var lastCapPrune = -Double.infinity

    /// Opens (creating or migrating when needed) the database at `path`; the parent directory must exist.
    public init(path: String, maxChallenges: Int = 100_000) throws(IssuerStateError) {
        self.maxChallenges = maxChallenges
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(handle)
            throw IssuerStateError("cannot open issuer state \(path): \(message)")
        }
        db = handle
        sqlite3_busy_timeout(handle, Self.busyTimeoutMs)
        do {
            try Self.script(handle, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
            try Self.transaction(handle) { (db: OpaquePointer) throws(IssuerStateError) in try Self.prepareSchema(db) }
        } catch {
            sqlite3_close_v2(handle)
            db = nil
            throw IssuerStateError("cannot prepare issuer state \(path): \(error.description)")
        }
    }

    deinit { sqlite3_close_v2(db) }

    /// Creates the tables, or brings an older file's up to date. Runs inside `BEGIN IMMEDIATE`.
    static func prepareSchema(_ db: OpaquePointer) throws(IssuerStateError) {
        try script(db, """
            CREATE TABLE IF NOT EXISTS challenges (challenge BLOB PRIMARY KEY, app_id TEXT NOT NULL, expires_at REAL NOT NULL,
                address TEXT NOT NULL DEFAULT '');
            CREATE TABLE IF NOT EXISTS attested_keys (key_id BLOB NOT NULL, app_id TEXT NOT NULL, public_key BLOB NOT NULL,
                counter INTEGER NOT NULL, environment TEXT NOT NULL, receipt BLOB NOT NULL, attested_at REAL NOT NULL,
                counter_window INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (key_id));
            CREATE TABLE IF NOT EXISTS used_inputs (digest BLOB PRIMARY KEY, expires_at REAL NOT NULL);
            """)
        // Files from before the counter window and the per-address bound.
        if try !hasColumn(db, "attested_keys", "counter_window") {
            try script(db, "ALTER TABLE attested_keys ADD COLUMN counter_window INTEGER NOT NULL DEFAULT 0;")
        }
        // Files from before fraud risk (docs/issuer.md "Fraud risk").
        for (column, type) in [("risk_metric", "INTEGER"), ("receipt_not_before", "REAL"), ("receipt_refresh_at", "REAL")]
            where try !hasColumn(db, "attested_keys", column) {
            try script(db, "ALTER TABLE attested_keys ADD COLUMN \(column) \(type);")
        }
        try script(db, "CREATE INDEX IF NOT EXISTS attested_keys_by_refresh ON attested_keys (receipt_refresh_at);")
        if try !hasColumn(db, "challenges", "address") {
            try script(db, "ALTER TABLE challenges ADD COLUMN address TEXT NOT NULL DEFAULT '';")
        }
        // The row count of `challenges`, kept by triggers (created with it, from the rows already there).
        try script(db, """
            CREATE INDEX IF NOT EXISTS challenges_by_address ON challenges (address, expires_at);
            CREATE TABLE IF NOT EXISTS challenge_count (id INTEGER PRIMARY KEY CHECK (id = 0), n INTEGER NOT NULL);
            INSERT OR IGNORE INTO challenge_count VALUES (0, (SELECT count(*) FROM challenges));
            CREATE TRIGGER IF NOT EXISTS challenges_counted_in AFTER INSERT ON challenges
                BEGIN UPDATE challenge_count SET n = n + 1 WHERE id = 0; END;
            CREATE TRIGGER IF NOT EXISTS challenges_counted_out AFTER DELETE ON challenges
                BEGIN UPDATE challenge_count SET n = n - 1 WHERE id = 0; END;
            """)
    }

    static func hasColumn(_ db: OpaquePointer, _ table: String, _ column: String) throws(IssuerStateError) -> Bool {
        try step(db, "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2", [.text(table), .text(column)]) {
            sqlite3_column_int64($0, 0)
        } == 1
    }

    public func putChallenge(_ challenge: [UInt8], appId: String, address: String, now: Double, expiresAt: Double,
                             maxPerAddress: Int) async throws(IssuerStateError) -> ChallengeAdmission {
        let maxChallenges = self.maxChallenges
        return try await run { [self] (db: OpaquePointer) throws(IssuerStateError) -> ChallengeAdmission in
            try Self.transaction(db) { (db: OpaquePointer) throws(IssuerStateError) -> ChallengeAdmission in
                if maxPerAddress > 0 {
                    let held = try Self.step(db, "SELECT count(*) FROM challenges WHERE address = ?1 AND expires_at > ?2",
                                             [.text(address), .real(now)]) { sqlite3_column_int64($0, 0) } ?? 0
                    if held >= maxPerAddress { return .addressFull }
                }
                var rows = try Self.challengeRows(db)
                if rows >= maxChallenges, now - lastCapPrune >= 1 {
                    lastCapPrune = now
                    try Self.exec(db, "DELETE FROM challenges WHERE expires_at <= ?1", [.real(now)])
                    rows = try Self.challengeRows(db)
                }
                if rows >= maxChallenges { return .storeFull }
                try Self.exec(db, """
                    INSERT INTO challenges (challenge, app_id, expires_at, address) VALUES (?1, ?2, ?3, ?4)
                    ON CONFLICT(challenge) DO UPDATE SET app_id = excluded.app_id, expires_at = excluded.expires_at,
                        address = excluded.address
                    """, [.blob(challenge), .text(appId), .real(expiresAt), .text(address)])
                return .stored
            }
        }
    }

    static func challengeRows(_ db: OpaquePointer) throws(IssuerStateError) -> Int {
        Int(try step(db, "SELECT n FROM challenge_count WHERE id = 0", []) { sqlite3_column_int64($0, 0) } ?? 0)
    }

    public func takeChallenge(_ challenge: [UInt8], appId: String, now: Double) async throws(IssuerStateError) -> Bool {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
            let row = try Self.step(db, "DELETE FROM challenges WHERE challenge = ?1 RETURNING app_id, expires_at", [.blob(challenge)]) { stmt in
                (String(cString: sqlite3_column_text(stmt, 0)), sqlite3_column_double(stmt, 1))
            }
            guard let (owner, expiresAt) = row else { return false }
            return owner == appId && now < expiresAt
        }
    }

    public func insertKey(_ key: AttestedKey) async throws(IssuerStateError) -> Bool {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
            try Self.exec(db, """
                INSERT OR IGNORE INTO attested_keys (key_id, app_id, public_key, counter, environment, receipt, attested_at,
                    counter_window, risk_metric, receipt_not_before, receipt_refresh_at)
                    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                """, [
                .blob(key.keyId), .text(key.appId), .blob(key.publicKey), .int(Int64(key.counter)), .text(key.environment),
                .blob(key.receipt), .real(key.attestedAt), .int(Int64(bitPattern: key.counterWindow)),
                key.riskMetric.map { .int(Int64($0)) } ?? .null, key.receiptNotBefore.map { .real($0) } ?? .null,
                key.receiptRefreshAt.map { .real($0) } ?? .null,
            ])
            return sqlite3_changes(db) == 1
        }
    }

    public func key(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) -> AttestedKey? {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> AttestedKey? in
            try Self.step(db, """
                SELECT public_key, counter, environment, receipt, attested_at, counter_window, risk_metric,
                    receipt_not_before, receipt_refresh_at, key_id, app_id FROM attested_keys
                WHERE key_id = ?1 AND app_id = ?2
                """, [.blob(keyId), .text(appId)]) { stmt in Self.attestedKey(stmt) }
        }
    }

    public func acceptCounter(_ keyId: [UInt8], appId: String, counter: UInt32) async throws(IssuerStateError) -> CounterVerdict {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> CounterVerdict in
            try Self.transaction(db) { (db: OpaquePointer) throws(IssuerStateError) -> CounterVerdict in
                let row = try Self.step(db, "SELECT counter, counter_window FROM attested_keys WHERE key_id = ?1 AND app_id = ?2",
                                        [.blob(keyId), .text(appId)]) { stmt in
                    CounterWindow(highest: UInt32(truncatingIfNeeded: sqlite3_column_int64(stmt, 0)),
                                  window: UInt64(bitPattern: sqlite3_column_int64(stmt, 1)))
                }
                guard var window = row else { return .unknownKey }
                let verdict = window.accept(counter)
                guard verdict == .accepted else { return verdict }
                try Self.exec(db, "UPDATE attested_keys SET counter = ?2, counter_window = ?3 WHERE key_id = ?1",
                              [.blob(keyId), .int(Int64(window.highest)), .int(Int64(bitPattern: window.window))])
                return .accepted
            }
        }
    }

    public func consumeOnce(_ digest: [UInt8], expiresAt: Double, now: Double) async throws(IssuerStateError) -> Bool {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
            try Self.exec(db, """
                INSERT INTO used_inputs VALUES (?1, ?2)
                ON CONFLICT(digest) DO UPDATE SET expires_at = excluded.expires_at WHERE used_inputs.expires_at <= ?3
                """, [.blob(digest), .real(expiresAt), .real(now)])
            return sqlite3_changes(db) == 1
        }
    }

    // MARK: plumbing

    enum Value { case blob([UInt8]), text(String), int(Int64), real(Double), null }

    /// Runs `body` on the store's queue; SQLite errors become `IssuerStateError` (503 for the exchange).
    func run<T: Sendable>(_ body: @escaping @Sendable (OpaquePointer) throws(IssuerStateError) -> T) async throws(IssuerStateError) -> T {
        let result: Result<T, IssuerStateError> = await withCheckedContinuation { continuation in
            queue.async { [self] in
                guard let db else { return continuation.resume(returning: .failure(IssuerStateError("issuer state is closed"))) }
                let outcome = Result { () throws(IssuerStateError) -> T in try body(db) }
                writes += 1
                if writes % pruneEvery == 0 { prune(db) }
                continuation.resume(returning: outcome)
            }
        }
        return try result.get()
    }

    private func prune(_ db: OpaquePointer) {
        let now = Date().timeIntervalSince1970
        try? Self.exec(db, "DELETE FROM challenges WHERE expires_at <= ?1", [.real(now)])
        try? Self.exec(db, "DELETE FROM used_inputs WHERE expires_at <= ?1", [.real(now)])
    }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT` (the write lock first: see the type's comment); rolls back
    /// when it throws.
    static func transaction<T>(_ db: OpaquePointer, _ body: (OpaquePointer) throws(IssuerStateError) -> T) throws(IssuerStateError) -> T {
        try exec(db, "BEGIN IMMEDIATE", [])
        do {
            let result = try body(db)
            try exec(db, "COMMIT", [])
            return result
        } catch {
            try? exec(db, "ROLLBACK", [])
            throw error
        }
    }

    /// Runs several statements without parameters.
    static func script(_ db: OpaquePointer, _ sql: String) throws(IssuerStateError) {
        var error: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &error) != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
            sqlite3_free(error)
            throw IssuerStateError("issuer state: \(message)")
        }
    }

    /// Runs `sql` with `values`, ignoring any rows.
    static func exec(_ db: OpaquePointer, _ sql: String, _ values: [Value]) throws(IssuerStateError) {
        let _: Int? = try step(db, sql, values) { _ in 0 }
    }

    /// Prepares, binds and steps `sql` to the end; `row` reads the first result row, if any.
    static func step<R>(_ db: OpaquePointer, _ sql: String, _ values: [Value],
                        row: (OpaquePointer) -> R) throws(IssuerStateError) -> R? {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw IssuerStateError("issuer state: \(String(cString: sqlite3_errmsg(db)))")
        }
        defer { sqlite3_finalize(stmt) }
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            switch value {
            case .blob(let bytes):
                _ = bytes.withUnsafeBytes { sqlite3_bind_blob(stmt, index, $0.baseAddress, Int32($0.count), CSQLite_TRANSIENT()) }
            case .text(let text):
                sqlite3_bind_text(stmt, index, text, -1, CSQLite_TRANSIENT())
            case .int(let n):
                sqlite3_bind_int64(stmt, index, n)
            case .real(let d):
                sqlite3_bind_double(stmt, index, d)
            case .null:
                sqlite3_bind_null(stmt, index)
            }
        }
        var result: R?
        var rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW {
            result = row(stmt)
            while rc == SQLITE_ROW { rc = sqlite3_step(stmt) }  // finish DELETE … RETURNING
        }
        guard rc == SQLITE_DONE else { throw IssuerStateError("issuer state: \(String(cString: sqlite3_errmsg(db)))") }
        return result
    }

    static func blob(_ stmt: OpaquePointer, _ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(stmt, column))
        guard count > 0, let pointer = sqlite3_column_blob(stmt, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
