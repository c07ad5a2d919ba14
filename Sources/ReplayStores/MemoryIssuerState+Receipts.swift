extension MemoryIssuerState: IssuerReceiptState {
    public func storeReceipt(_ keyId: [UInt8], appId: String, receipt: [UInt8], riskMetric: Int?, notBefore: Double?,
                             refreshAt: Double?) async throws(IssuerStateError) -> Bool {
        state.withLock { state in
            guard var key = state.keys[keyId], key.appId == appId else { return false }
            key.receipt = receipt
            key.riskMetric = riskMetric
            key.receiptNotBefore = notBefore
            key.receiptRefreshAt = refreshAt
            state.keys[keyId] = key
            return true
        }
    }

    public func scheduleRefresh(_ keyId: [UInt8], appId: String, at: Double?) async throws(IssuerStateError) -> Bool {
        state.withLock { state in
            guard state.keys[keyId]?.appId == appId else { return false }
            state.keys[keyId]?.receiptRefreshAt = at
            return true
        }
    }

    /// Under the store's lock: due → leased.
    public func claimRefresh(_ keyId: [UInt8], appId: String, now: Double, leaseUntil: Double) async throws(IssuerStateError) -> Bool {
        state.withLock { state in
            guard let key = state.keys[keyId], key.appId == appId, let at = key.receiptRefreshAt, at <= now else { return false }
            state.keys[keyId]?.receiptRefreshAt = leaseUntil
            return true
        }
    }

    /// Nothing to release: the claim is the leased refresh time, which the refresh replaced.
    public func releaseRefreshClaim(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) {}

    public func refreshPause(appId: String) async throws(IssuerStateError) -> ReceiptRefreshPause? {
        refreshPauses.withLock { $0[appId] }
    }

    public func setRefreshPause(appId: String, _ pause: ReceiptRefreshPause?) async throws(IssuerStateError) {
        refreshPauses.withLock { $0[appId] = pause }
    }

    public func keysDueForRefresh(now: Double, limit: Int) async throws(IssuerStateError) -> [AttestedKey] {
        state.withLock { state in
            let due = state.keys.values.filter { ($0.receiptRefreshAt ?? .infinity) <= now }
            return Array(due.sorted { $0.receiptRefreshAt! < $1.receiptRefreshAt! }.prefix(max(0, limit)))
        }
    }
}
