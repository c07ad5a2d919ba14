import AppAttest
import Foundation
import GatewayConfig
import JSONLog
import ReplayStores

/// Fraud risk (docs/issuer.md "Fraud risk"): the attestation's receipt is verified and kept with the key; the
/// key's latest risk metric decides assertions when `max_risk_metric` is set and goes into minted tokens.
extension IssuerService {
    /// One receipt verifier per app with `app_attest`, trusting Apple Root CA - G3 or `receipt_root_ca_file`.
    static func receiptVerifiers(_ settings: IssuerSettings) throws -> [String: AppAttestReceiptVerifier] {
        var verifiers: [String: AppAttestReceiptVerifier] = [:]
        for app in settings.apps {
            guard let attest = app.appAttest else { continue }
            let pem = try attest.receiptRootCAFile.map { try String(contentsOfFile: $0, encoding: .utf8) } ?? AppAttestReceiptRootCA.applePEM
            verifiers[app.appId] = try AppAttestReceiptVerifier(rootCertificatePEM: pem)
        }
        return verifiers
    }

    /// Whether the app's keys have their receipts refreshed: `device_check` set and `risk.refresh` not 0.
    static func refreshesReceipts(_ app: IssuerAppSettings) -> Bool {
        app.deviceCheck != nil && (app.appAttest?.risk.refresh ?? 0) > 0
    }

    /// `key` with the attestation's receipt verified: its metric and not-before when it passes, and its first
    /// refresh due at once when the app refreshes receipts; without a receipt (logged with its rule) when it fails.
    /// A bad receipt never refuses the attestation: the attestation is judged by its own rules.
    func withVerifiedReceipt(_ key: AttestedKey, _ attestation: AppAttestAttestation, app: IssuerAppSettings,
                             appId: AppAttestAppID, clientDataHash: [UInt8], now: Double) -> AttestedKey {
        var key = key
        guard let verifier = receiptVerifiers[app.appId] else { return key }
        do {
            let receipt = try verifier.verify(attestation.receipt, appId: appId, publicKey: attestation.publicKey,
                                              clientDataHash: clientDataHash, at: Int64(now))
            key.riskMetric = receipt.riskMetric
            key.receiptNotBefore = receipt.notBefore
            key.receiptRefreshAt = Self.refreshesReceipts(app) ? max(now, receipt.notBefore ?? now) : nil
        } catch {
            log?.warning("App Attest receipt refused; the key is kept without one",
                         [("app_id", .string(app.appId)), ("rule", .string(error.rule.rawValue)),
                          ("detail", .string(error.detail))])
            key.receipt = []
            key.riskMetric = nil
            key.receiptNotBefore = nil
            key.receiptRefreshAt = nil
        }
        return key
    }

    /// `riskVerdict` of an assertion whose signature verified: the key counted as seen with its metric, and a refusal
    /// counted for `appcheck_issuer_risk_refusals_total` and the dashboard.
    func riskVerdict(_ key: AttestedKey, app: IssuerAppSettings) throws(IssuerError) -> Int? {
        let now = clock()
        riskMetrics.sawKey(key.keyId, appId: app.appId, metric: key.riskMetric, now: now)
        do { return try Self.riskVerdict(key, app: app) } catch {
            riskMetrics.refused(appId: app.appId, rule: error.rule, now: now)
            throw error
        }
    }

    /// Refuses (403 `risk_metric_exceeded`, or `risk_metric_unknown` with `require_risk_metric`) an assertion from
    /// `key` when the app sets `max_risk_metric`; otherwise the metric to put in the token (nil when unknown).
    static func riskVerdict(_ key: AttestedKey, app: IssuerAppSettings) throws(IssuerError) -> Int? {
        guard app.maxRiskMetric > 0 else { return key.riskMetric }
        guard let metric = key.riskMetric else {
            if app.requireRiskMetric { throw .permissionDenied("risk_metric_unknown") }
            return nil
        }
        guard metric <= app.maxRiskMetric else {
            throw .permissionDenied("risk_metric_exceeded", detail: "risk metric \(metric) is above \(app.maxRiskMetric)")
        }
        return metric
    }
}
