import CSQLite

extension SQLiteIssuerState: IssuerReceiptState {
    public func storeReceipt(_ keyId: [UInt8], appId: String, receipt: [UInt8], riskMetric: Int?, notBefore: Double?,
                             refreshAt: Double?) async throws(IssuerStateError) -> Bool {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
            try Self.exec(db, """
                UPDATE attested_keys SET receipt = ?3, risk_metric = ?4, receipt_not_before = ?5, receipt_refresh_at = ?6
                WHERE key_id = ?1 AND app_id = ?2
                """, [.blob(keyId), .text(appId), .blob(receipt), riskMetric.map { .int(Int64($0)) } ?? .null,
                      notBefore.map { .real($0) } ?? .null, refreshAt.map { .real($0) } ?? .null])
            return sqlite3_changes(db) == 1
        }
    }

    public func scheduleRefresh(_ keyId: [UInt8], appId: String, at: Double?) async throws(IssuerStateError) -> Bool {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
            try Self.exec(db, "UPDATE attested_keys SET receipt_refresh_at = ?3 WHERE key_id = ?1 AND app_id = ?2",
                          [.blob(keyId), .text(appId), at.map { .real($0) } ?? .null])
            return sqlite3_changes(db) == 1
        }
    }

    /// One conditional `UPDATE` (due → leased) inside `BEGIN IMMEDIATE`: of several processes on one file, the first
    /// to take the write lock moves the refresh time past `now`, and every later one finds the key no longer due.
    public func claimRefresh(_ keyId: [UInt8], appId: String, now: Double, leaseUntil: Double) async throws(IssuerStateError) -> Bool {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
            try Self.transaction(db) { (db: OpaquePointer) throws(IssuerStateError) -> Bool in
                try Self.exec(db, """
                    UPDATE attested_keys SET receipt_refresh_at = ?4
                    WHERE key_id = ?1 AND app_id = ?2 AND receipt_refresh_at IS NOT NULL AND receipt_refresh_at <= ?3
                    """, [.blob(keyId), .text(appId), .real(now), .real(leaseUntil)])
                return sqlite3_changes(db) == 1
            }
        }
    }

    /// Nothing to release: the claim is the leased refresh time, which the refresh replaced.
    public func releaseRefreshClaim(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) {}

    /// The table is made on first use (files made before it existed get it then).
    static let pausesTable = """
        CREATE TABLE IF NOT EXISTS receipt_refresh_pauses (app_id TEXT PRIMARY KEY, until REAL NOT NULL, length REAL NOT NULL)
        """

    public func refreshPause(appId: String) async throws(IssuerStateError) -> ReceiptRefreshPause? {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> ReceiptRefreshPause? in
            try Self.exec(db, Self.pausesTable, [])
            return try Self.step(db, "SELECT until, length FROM receipt_refresh_pauses WHERE app_id = ?1", [.text(appId)]) {
                ReceiptRefreshPause(until: sqlite3_column_double($0, 0), length: sqlite3_column_double($0, 1))
            }
        }
    }

    public func setRefreshPause(appId: String, _ pause: ReceiptRefreshPause?) async throws(IssuerStateError) {
        try await run { (db: OpaquePointer) throws(IssuerStateError) in
            try Self.exec(db, Self.pausesTable, [])
            if let pause {
                try Self.exec(db, "INSERT OR REPLACE INTO receipt_refresh_pauses (app_id, until, length) VALUES (?1, ?2, ?3)",
                              [.text(appId), .real(pause.until), .real(pause.length)])
            } else {
                try Self.exec(db, "DELETE FROM receipt_refresh_pauses WHERE app_id = ?1", [.text(appId)])
            }
        }
    }

    public func keysDueForRefresh(now: Double, limit: Int) async throws(IssuerStateError) -> [AttestedKey] {
        try await run { (db: OpaquePointer) throws(IssuerStateError) -> [AttestedKey] in
            var stmt: OpaquePointer?
            let sql = """
                SELECT public_key, counter, environment, receipt, attested_at, counter_window, risk_metric,
                    receipt_not_before, receipt_refresh_at, key_id, app_id FROM attested_keys
                WHERE receipt_refresh_at IS NOT NULL AND receipt_refresh_at <= ?1 ORDER BY receipt_refresh_at LIMIT ?2
                """
            guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
                throw IssuerStateError("issuer state: \(String(cString: sqlite3_errmsg(db)))")
            }
            defer { sqlite3_finalize(stmt) }
            sqlite3_bind_double(stmt, 1, now)
            sqlite3_bind_int64(stmt, 2, Int64(max(0, limit)))
            var keys: [AttestedKey] = []
            var rc = sqlite3_step(stmt)
            while rc == SQLITE_ROW {
                keys.append(Self.attestedKey(stmt))
                rc = sqlite3_step(stmt)
            }
            guard rc == SQLITE_DONE else { throw IssuerStateError("issuer state: \(String(cString: sqlite3_errmsg(db)))") }
            return keys
        }
    }

    /// A key from a row of `public_key, counter, environment, receipt, attested_at, counter_window, risk_metric,
    /// receipt_not_before, receipt_refresh_at, key_id, app_id`.
    static func attestedKey(_ stmt: OpaquePointer) -> AttestedKey {
        func optionalDouble(_ column: Int32) -> Double? {
            sqlite3_column_type(stmt, column) == SQLITE_NULL ? nil : sqlite3_column_double(stmt, column)
        }
        return AttestedKey(keyId: blob(stmt, 9), appId: String(cString: sqlite3_column_text(stmt, 10)), publicKey: blob(stmt, 0),
                           counter: UInt32(truncatingIfNeeded: sqlite3_column_int64(stmt, 1)),
                           counterWindow: UInt64(bitPattern: sqlite3_column_int64(stmt, 5)),
                           environment: String(cString: sqlite3_column_text(stmt, 2)), receipt: blob(stmt, 3),
                           attestedAt: sqlite3_column_double(stmt, 4),
                           riskMetric: sqlite3_column_type(stmt, 6) == SQLITE_NULL ? nil : Int(sqlite3_column_int64(stmt, 6)),
                           receiptNotBefore: optionalDouble(7), receiptRefreshAt: optionalDouble(8))
    }
}
