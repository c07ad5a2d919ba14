import AppAttest
import AppCheck
import Dispatch
import GatewayConfig
import Foundation
import JSONLog
import KeySets
import ReplayStores
import Synchronization

/// What Apple's App Attest data API said about one receipt (`POST <api_url>/v1/attestationData`).
enum ReceiptExchangeAnswer: Sendable, Equatable {
    /// 200: a new receipt (decoded from the base64 body).
    case receipt([UInt8])
    /// 304: asked before the receipt's not-before; keep the old one.
    case notYet
    /// 404: Apple has no data for this key any more (it keeps it about 30 days); keep the last receipt.
    case noData
    /// 401 or 403: Apple refused our DeviceCheck key.
    case keyRefused(Int, String)
    /// 429, 5xx, any other status, a 200 without base64, or no answer: try later.
    case backOff(String)
}

/// Exchanges receipts for one app (docs/issuer.md "Fraud risk"): `Authorization: Bearer` the DeviceCheck ES256 JWT
/// (`DeviceCheckClientJWT`, reused for at most 20 minutes), body the receipt in standard base64. The blocking call
/// runs on a queue of its own, never on an event loop or the issuer's executor.
final class ReceiptExchangeClient: Sendable {
    static let timeout = 10.0
    static let maxResponseBytes = 64 * 1024
    private static let queue = DispatchQueue(label: "appcheck-gateway.receipt-refresh", qos: .utility, attributes: .concurrent)

    let keyId: String
    let teamId: String
    let risk: ReceiptRefreshSettings
    private let key: ES256PrivateKey
    private let transport: BlockingPost
    private let bearer = Mutex<(token: String, madeAt: Double)?>(nil)

    init(deviceCheck: DeviceCheckAppSettings, teamId: String, risk: ReceiptRefreshSettings) throws(IssuerStartError) {
        let pem: String
        do { pem = try String(contentsOfFile: deviceCheck.privateKeyPath, encoding: .utf8) } catch {
            throw IssuerStartError("device_check.private_key '\(deviceCheck.privateKeyPath)': cannot be read")
        }
        do { key = try ES256PrivateKey(pemRepresentation: pem) } catch {
            throw IssuerStartError("device_check.private_key '\(deviceCheck.privateKeyPath)': \(error)")
        }
        keyId = deviceCheck.keyId
        self.teamId = teamId
        self.risk = risk
        transport = BlockingPost(timeout: Self.timeout, maxBodyBytes: Self.maxResponseBytes)
    }

    /// Sends `receipt` of a key made in `environment` to Apple at wall time `now`.
    func exchange(_ receipt: [UInt8], environment: AppAttestEnvironment, now: Double) async -> ReceiptExchangeAnswer {
        let authorization: String
        do { authorization = "Bearer " + (try bearerToken(now: now)) } catch {
            return .backOff("cannot sign the bearer token: \(error)")
        }
        let endpoint = risk.effectiveAPIURL(environment) + "/v1/attestationData"
        let body = Array(Data(receipt).base64EncodedString().utf8)
        let transport = self.transport
        return await withCheckedContinuation { continuation in
            Self.queue.async {
                let answer: ReceiptExchangeAnswer
                do {
                    let response = try transport.post(endpoint, headers: [("Authorization", authorization),
                                                                          ("Content-Type", "application/octet-stream")], body: body)
                    answer = Self.answer(status: response.status, body: response.body)
                } catch {
                    answer = .backOff("\(error)")
                }
                continuation.resume(returning: answer)
            }
        }
    }

    static func answer(status: Int, body: [UInt8]) -> ReceiptExchangeAnswer {
        switch status {
        case 200:
            let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let data = Data(base64Encoded: text, options: .ignoreUnknownCharacters), !data.isEmpty else {
                return .backOff("Apple answered 200 without a base64 receipt")
            }
            return .receipt([UInt8](data))
        case 304: return .notYet
        case 404: return .noData
        case 401, 403: return .keyRefused(status, DeviceCheckClient.reason(body))
        default: return .backOff("Apple answered HTTP \(status)")
        }
    }

    private func bearerToken(now: Double) throws(ES256KeyError) -> String {
        if let cached = bearer.withLock({ $0 }), now >= cached.madeAt, now - cached.madeAt < DeviceCheckClient.bearerLifetime {
            return cached.token
        }
        let token = try DeviceCheckClientJWT.make(key: key, keyId: keyId, teamId: teamId, issuedAt: Int(now))
        bearer.withLock { $0 = (token, now) }
        return token
    }
}

/// The background receipt refresher (docs/issuer.md "Fraud risk"): every `tick` seconds it takes the keys whose
/// refresh is due from the state store and exchanges their receipts with Apple, at most `maxConcurrent` at once,
/// each key at most once per its app's `risk.refresh`. It runs as a Task on the issuer's executor (never an event
/// loop); the HTTP calls block a queue of their own.
///
/// - 200: the new receipt is verified (App ID, attested key, signature at now) and stored with its risk metric
///   (field 17) and not-before; next refresh after `refresh` and not before its not-before.
/// - 304: not yet; next try after `refresh` and not before the stored not-before.
/// - 404: Apple has no data (it keeps it about 30 days): the last receipt and metric stay; the key is not
///   refreshed again (its next attestation starts over).
/// - 401/403, 429, 5xx, no answer: the app's calls pause (1 minute, doubling to `refresh`, at most an hour); the
///   key stays due. The pause is kept in the state store too (`IssuerReceiptState.refreshPause`), read at the start
///   of every pass, so another instance on the same store does not ask Apple again at once. Each pause is logged
///   once (by the call that starts it), not once per key in flight.
///
/// Before asking Apple, a key's refresh is claimed in the state store in one atomic step
/// (`IssuerReceiptState.claimRefresh`: a conditional update in memory and SQLite, `SET … NX PX` in Redis), which
/// also leases it (not due for `lease` seconds, in case the claimer dies): of several instances sharing the store,
/// exactly one asks Apple about a key per period; the others count it as skipped.
public final class RiskRefresher: Sendable {
    public struct Summary: Sendable, Equatable {
        public var refreshed = 0, notYet = 0, noData = 0, backedOff = 0, refused = 0, skipped = 0
        public init() {}
    }

    static let batch = 256
    /// Seconds a key is held (not due) while its exchange runs.
    static let lease = 600.0
    let maxConcurrent: Int
    let tick: Double
    private let apps: [String: (app: IssuerAppSettings, appId: AppAttestAppID, client: ReceiptExchangeClient)]
    private let verifiers: [String: AppAttestReceiptVerifier]
    private let state: IssuerReceiptState
    private let metrics: RiskMetrics?
    private let log: LogSink?
    private let clock: @Sendable () -> Double
    /// Per app: calls paused until, and the current pause length (this instance's copy of the store's).
    private let pauses = Mutex<[String: ReceiptRefreshPause]>([:])
    private let task = Mutex<Task<Void, Never>?>(nil)
    /// `appcheck_issuer_receipt_refresh_total{app_id,result}`: per configured app, per result.
    private let counts = Mutex<[String: [String: Int]]>([:])
    static let results = ["refreshed", "not_yet", "no_data", "backed_off", "refused"]

    /// Nil when no app refreshes receipts (`device_check` set and `risk.refresh` not 0).
    init?(settings: IssuerSettings, state: IssuerReceiptState, verifiers: [String: AppAttestReceiptVerifier],
          metrics: RiskMetrics? = nil, log: LogSink?,
          clock: @escaping @Sendable () -> Double, maxConcurrent: Int = 4, tick: Double = 60) throws {
        var apps: [String: (app: IssuerAppSettings, appId: AppAttestAppID, client: ReceiptExchangeClient)] = [:]
        for app in settings.apps where IssuerService.refreshesReceipts(app) {
            guard let teamId = app.teamId, let bundleId = app.bundleId, let deviceCheck = app.deviceCheck,
                  let risk = app.appAttest?.risk else { continue }
            apps[app.appId] = (app, AppAttestAppID(teamId: teamId, bundleId: bundleId),
                               try ReceiptExchangeClient(deviceCheck: deviceCheck, teamId: teamId, risk: risk))
        }
        guard !apps.isEmpty else { return nil }
        self.apps = apps
        self.verifiers = verifiers
        self.state = state
        self.metrics = metrics
        self.log = log
        self.clock = clock
        self.maxConcurrent = max(1, maxConcurrent)
        self.tick = tick
    }

    /// Starts the background loop (once).
    func start() {
        task.withLock { task in
            guard task == nil else { return }
            task = Task(executorPreference: IssuerExecutor.shared) { [self] in
                while !Task.isCancelled {
                    _ = await runOnce()
                    try? await Task.sleep(nanoseconds: UInt64(tick * 1_000_000_000))
                }
            }
        }
    }

    /// Stops the loop (a call in flight finishes on its own queue).
    func stop() { task.withLock { $0?.cancel(); $0 = nil } }

    /// One pass: every due key (up to a batch), `maxConcurrent` at a time.
    @discardableResult
    public func runOnce() async -> Summary {
        let now = clock()
        // Pauses another instance recorded (or that ended there) replace this instance's copy.
        for appId in apps.keys {
            do {
                let shared = try await state.refreshPause(appId: appId)
                pauses.withLock { $0[appId] = shared }
            } catch {
                continue  // the store did not answer: keep this instance's copy
            }
        }
        let due: [AttestedKey]
        do { due = try await state.keysDueForRefresh(now: now, limit: Self.batch) } catch {
            log?.warning("receipt refresh: the state store did not answer", [("error", .string(error.description))])
            return Summary()
        }
        var summary = Summary()
        await withTaskGroup(of: Outcome.self) { group in
            var index = 0, running = 0
            while index < due.count || running > 0 {
                while running < maxConcurrent, index < due.count {
                    let key = due[index]
                    index += 1
                    running += 1
                    group.addTask { await self.refresh(key) }
                }
                if let outcome = await group.next() {
                    running -= 1
                    switch outcome {
                    case .refreshed: summary.refreshed += 1
                    case .notYet: summary.notYet += 1
                    case .noData: summary.noData += 1
                    case .backedOff: summary.backedOff += 1
                    case .refused: summary.refused += 1
                    case .skipped: summary.skipped += 1
                    }
                }
            }
        }
        return summary
    }

    enum Outcome: Sendable { case refreshed, notYet, noData, backedOff, refused, skipped }

    private func refresh(_ key: AttestedKey) async -> Outcome {
        let outcome = await exchange(key)
        let result: String? = switch outcome {
        case .refreshed: "refreshed"
        case .notYet: "not_yet"
        case .noData: "no_data"
        case .backedOff: "backed_off"
        case .refused: "refused"
        case .skipped: nil
        }
        if let result, apps[key.appId] != nil { counts.withLock { $0[key.appId, default: [:]][result, default: 0] += 1 } }
        return outcome
    }

    /// The counts behind `appcheck_issuer_receipt_refresh_total{app_id,result}`: every configured app with every
    /// result, in a stable order (the proxy renders them on its metrics page).
    package func refreshCounts() -> [(appId: String, result: String, count: Int)] {
        let counts = counts.withLock { $0 }
        return apps.keys.sorted().flatMap { appId in
            Self.results.map { result in (appId, result, counts[appId]?[result] ?? 0) }
        }
    }

    private func exchange(_ key: AttestedKey) async -> Outcome {
        let now = clock()
        guard let entry = apps[key.appId], !key.receipt.isEmpty,
              let environment = AppAttestEnvironment(rawValue: key.environment) else {
            _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: nil)
            return .skipped
        }
        if let pause = pauses.withLock({ $0[key.appId] }), now < pause.until { return .skipped }
        do {
            guard try await state.claimRefresh(key.keyId, appId: key.appId, now: now, leaseUntil: now + Self.lease) else {
                return .skipped
            }
        } catch {
            log?.warning("receipt refresh: the state store did not answer", [("error", .string(error.description))])
            return .skipped
        }
        let outcome = await exchange(key, entry, environment: environment, now: now)
        try? await state.releaseRefreshClaim(key.keyId, appId: key.appId)
        return outcome
    }

    /// The exchange of a key this instance has claimed.
    private func exchange(_ key: AttestedKey, _ entry: (app: IssuerAppSettings, appId: AppAttestAppID, client: ReceiptExchangeClient),
                          environment: AppAttestEnvironment, now: Double) async -> Outcome {
        let interval = entry.client.risk.refresh
        let due = key.receiptRefreshAt ?? now
        let fields: [(String, LogValue)] = [("app_id", .string(key.appId))]
        switch await entry.client.exchange(key.receipt, environment: environment, now: now) {
        case .receipt(let bytes):
            await resume(key.appId)
            guard let verifier = verifiers[key.appId], let publicKey = AppAttestPublicKey(uncompressedPoint: key.publicKey) else {
                _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: nil)
                return .skipped
            }
            do {
                let receipt = try verifier.verify(bytes, appId: entry.appId, publicKey: publicKey, at: Int64(now))
                let next = max(now + interval, receipt.notBefore ?? 0)
                let metric = receipt.riskMetric ?? key.riskMetric
                _ = try await state.storeReceipt(key.keyId, appId: key.appId, receipt: bytes, riskMetric: metric,
                                                 notBefore: receipt.notBefore, refreshAt: next)
                metrics?.refreshed(key.keyId, appId: key.appId, metric: metric, now: now)
                return .refreshed
            } catch let failure as AppAttestReceiptFailure {
                log?.warning("receipt refresh: Apple's new receipt was refused; the last one is kept",
                             fields + [("rule", .string(failure.rule.rawValue)), ("detail", .string(failure.detail))])
                _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: now + interval)
                return .refused
            } catch {
                _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: due)
                return .backedOff
            }
        case .notYet:
            await resume(key.appId)
            _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: max(now + interval, key.receiptNotBefore ?? 0))
            return .notYet
        case .noData:
            await resume(key.appId)
            log?.warning("receipt refresh: Apple has no data for the key any more (404); its last receipt and metric are kept and it is not refreshed again",
                         fields + [("apple_status", .int(404))])
            _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: nil)
            return .noData
        case let .keyRefused(status, reason):
            if let pause = await pause(key.appId, now: now, interval: interval) {
                log?.error("receipt refresh: Apple refused the DeviceCheck key: check issuer.apps[].device_check key_id and private_key",
                           fields + [("apple_status", .int(status)), ("apple_reason", .string(reason)),
                                     ("paused_seconds", .int(Int(pause.length)))])
            }
            _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: due)
            return .backedOff
        case .backOff(let why):
            if let pause = await pause(key.appId, now: now, interval: interval) {
                log?.warning("receipt refresh: Apple unavailable, backing off",
                             fields + [("detail", .string(why)), ("paused_seconds", .int(Int(pause.length)))])
            }
            _ = try? await state.scheduleRefresh(key.keyId, appId: key.appId, at: due)
            return .backedOff
        }
    }

    /// Starts a pause of the app's calls and records it in the store; nil when one was already running (a call that
    /// was in flight when another failed): only the call that starts a pause logs it.
    private func pause(_ appId: String, now: Double, interval: Double) async -> ReceiptRefreshPause? {
        let started = pauses.withLock { pauses -> ReceiptRefreshPause? in
            if let current = pauses[appId], now < current.until { return nil }
            let length = min(max(60, (pauses[appId]?.length ?? 30) * 2), min(interval, 3600))
            let pause = ReceiptRefreshPause(until: now + length, length: length)
            pauses[appId] = pause
            return pause
        }
        if let started { try? await state.setRefreshPause(appId: appId, started) }
        return started
    }

    /// Apple answered: the app's pause (here and in the store) ends.
    private func resume(_ appId: String) async {
        guard pauses.withLock({ $0.removeValue(forKey: appId) }) != nil else { return }
        try? await state.setRefreshPause(appId: appId, nil)
    }

    /// Until when the app's calls are paused (tests).
    func pausedUntil(_ appId: String) -> Double? { pauses.withLock { $0[appId]?.until } }
}
