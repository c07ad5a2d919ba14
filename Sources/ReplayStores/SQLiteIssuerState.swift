import CSQLite
import Dispatch
import Foundation

/// `issuer.state.store: sqlite` (docs/issuer.md): durable on one host — attested keys survive restarts and
/// `kill -9` — and shareable by several gateway processes on that host (WAL, `busy_timeout`). Every "first
/// use wins" decision is one SQL statement, so it is atomic across processes too:
///
/// - a challenge is taken with `DELETE … RETURNING` (single use even when the exchange then fails);
/// - a key is inserted with `INSERT OR IGNORE`;
/// - the counter advances with `UPDATE … WHERE counter < ?` (compare-and-set);
/// - a one-time input is recorded with an upsert that replaces only an expired row.
///
/// Statements run on one serial queue of their own, never on an event loop or a cooperative thread; expired
/// challenges and inputs are pruned every `pruneEvery` writes.
public final class SQLiteIssuerState: IssuerState, @unchecked Sendable {
    /// How long a statement waits for another process's write lock before the store reports unavailable.
    static let busyTimeoutMs: Int32 = 2000
    private let pruneEvery = 1024
    private let queue = DispatchQueue(label: "appcheck-gateway.issuer-sqlite")
    // Touched only on `queue`.
    private var db: OpaquePointer?
    private var writes = 0

    /// Opens (creating when missing) the database at `path`; the parent directory must exist.
    public init(path: String) throws(IssuerStateError) {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(handle)
            throw IssuerStateError("cannot open issuer state \(path): \(message)")
        }
        db = handle
        sqlite3_busy_timeout(handle, Self.busyTimeoutMs)
        let schema = """
        PRAGMA journal_mode=WAL;
        PRAGMA synchronous=NORMAL;
        CREATE TABLE IF NOT EXISTS challenges (challenge BLOB PRIMARY KEY, app_id TEXT NOT NULL, expires_at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS attested_keys (key_id BLOB NOT NULL, app_id TEXT NOT NULL, public_key BLOB NOT NULL,
            counter INTEGER NOT NULL, environment TEXT NOT NULL, receipt BLOB NOT NULL, attested_at REAL NOT NULL,
            PRIMARY KEY (key_id));
        CREATE TABLE IF NOT EXISTS used_inputs (digest BLOB PRIMARY KEY, expires_at REAL NOT NULL);
        """
        var error: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(handle, schema, nil, nil, &error) != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(error)
            sqlite3_close_v2(handle)
            db = nil
            throw IssuerStateError("cannot prepare issuer state \(path): \(message)")
        }
    }

    deinit { sqlite3_close_v2(db) }

    public func putChallenge(_ challenge: [UInt8], appId: String, now: Double, expiresAt: Double) async throws(IssuerStateError) {
        _ = try await run { (db: OpaquePointer) throws(IssuerStateError) -> Int in
            try Self.exec(db, "INSERT OR REPLACE INTO challenges VALUES (?1, ?2, ?3)", [.blob(challenge), .text(appId), .real(expiresAt)])
            return 0
        }
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
            try Self.exec(db, "INSERT OR IGNORE INTO attested_keys VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", [
                .blob(key.keyId), .text(key.appId), .blob(key.publicKey), .int(Int64(key.counter)), .text(key.environment),
                .blob(key.receipt), .real(key.attestedAt),
            ])
            return sqlite3_changes(db) == 1
        }
    }

    public func key(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) -> AttestedKey? {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> AttestedKey? in
            try Self.step(db, """
                SELECT public_key, counter, environment, receipt, attested_at FROM attested_keys WHERE key_id = ?1 AND app_id = ?2
                """, [.blob(keyId), .text(appId)]) { stmt in
                AttestedKey(keyId: keyId, appId: appId, publicKey: Self.blob(stmt, 0),
                            counter: UInt32(truncatingIfNeeded: sqlite3_column_int64(stmt, 1)),
                            environment: String(cString: sqlite3_column_text(stmt, 2)), receipt: Self.blob(stmt, 3),
                            attestedAt: sqlite3_column_double(stmt, 4))
            }
        }
    }

    public func advanceCounter(_ keyId: [UInt8], appId: String, to counter: UInt32) async throws(IssuerStateError) -> Bool {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
            try Self.exec(db, "UPDATE attested_keys SET counter = ?3 WHERE key_id = ?1 AND app_id = ?2 AND counter < ?3",
                          [.blob(keyId), .text(appId), .int(Int64(counter))])
            return sqlite3_changes(db) == 1
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

    enum Value { case blob([UInt8]), text(String), int(Int64), real(Double) }

    /// Runs `body` on the store's queue; SQLite errors become `IssuerStateError` (503 for the exchange).
    private func run<T: Sendable>(_ body: @escaping @Sendable (OpaquePointer) throws(IssuerStateError) -> T) async throws(IssuerStateError) -> T {
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
