/// The rule a refused App Attest receipt broke (docs/issuer.md "Fraud risk"), named for the log line.
///
/// A bad receipt never refuses an attestation: the issuer logs the rule and keeps the key without a receipt.
public enum AppAttestReceiptRule: String, Sendable, Hashable, CaseIterable {
    /// There is no receipt (empty bytes).
    case missing = "receipt_missing"
    /// Not one BER/DER CMS ContentInfo of type SignedData with embedded content, too large, bytes after it, or
    /// a payload that is not a SET OF SEQUENCE { INTEGER, INTEGER, OCTET STRING } with the required fields.
    case malformed = "receipt_malformed"
    /// The CMS signature does not verify, it has no signer, or the signer's chain does not end at the trusted
    /// root at the given time.
    case signature = "receipt_signature"
    /// Field 2 (App ID) is not `<team_id>.<bundle_id>`.
    case appId = "receipt_app_id"
    /// Field 3 is not a certificate for the attested key.
    case attestedKey = "receipt_key"
    /// Field 4 (client hash) of an ATTEST receipt is not the attestation's clientDataHash.
    case clientHash = "receipt_client_hash"
    /// Field 21 (expiration time) is before the given time.
    case expired = "receipt_expired"
}

/// A refused receipt: the rule and a short reason for the log (never input bytes).
public struct AppAttestReceiptFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The rule that failed.
    public let rule: AppAttestReceiptRule
    /// A short English reason, for the log line only.
    public let detail: String

    /// Makes a failure.
    public init(_ rule: AppAttestReceiptRule, _ detail: String) {
        self.rule = rule
        self.detail = detail
    }

    /// `"<rule>: <detail>"`.
    public var description: String { "\(rule.rawValue): \(detail)" }
}
