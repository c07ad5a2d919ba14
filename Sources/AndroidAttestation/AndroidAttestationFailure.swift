/// A refused Android attestation: the rule that failed and a short reason for the log.
///
/// `detail` never contains input bytes, keys or challenges, so it is safe to log.
public struct AndroidAttestationFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The rule that failed.
    public let rule: AndroidAttestationRule
    /// A short English reason, for the log line only (never sent to the client).
    public let detail: String

    /// Makes a failure.
    public init(_ rule: AndroidAttestationRule, _ detail: String) {
        self.rule = rule
        self.detail = detail
    }

    /// `"<rule>: <detail>"`.
    public var description: String { "\(rule.rawValue): \(detail)" }
}
