/// A verified App Attest receipt (Apple, "Assessing fraud risk"; field numbers as in veehaitch/devicecheck-appattest
/// `receipt/Receipt.kt`, see docs/issuer.md "Fraud risk"). Times are seconds since the Unix epoch.
public struct AppAttestReceipt: Sendable, Equatable {
    /// Field 6: a receipt made at attestation (`ATTEST`) or by Apple's refresh endpoint (`RECEIPT`).
    public enum Kind: String, Sendable, Equatable {
        case attest = "ATTEST"
        case receipt = "RECEIPT"
    }

    /// The receipt as received (BER or DER CMS), what is stored and sent to Apple for a refresh.
    public let bytes: [UInt8]
    /// Field 2: `<team_id>.<bundle_id>`.
    public let appId: String
    /// Field 3: the attested credential certificate (DER).
    public let attestedCertificate: [UInt8]
    /// Field 4: the client hash (the attestation's clientDataHash for ATTEST receipts).
    public let clientHash: [UInt8]
    /// Field 5: Apple's opaque token.
    public let token: [UInt8]
    /// Field 6.
    public let kind: Kind
    /// Field 7 (undocumented): `sandbox` or `production`, when present.
    public let environment: String?
    /// Field 12: when Apple made the receipt.
    public let creationTime: Double
    /// Field 17: the risk metric (RECEIPT only): about how many keys this app attested on this device in 30 days.
    public let riskMetric: Int?
    /// Field 19: the earliest time Apple will refresh it (RECEIPT only).
    public let notBefore: Double?
    /// Field 21: when it expires.
    public let expirationTime: Double

    public init(bytes: [UInt8], appId: String, attestedCertificate: [UInt8], clientHash: [UInt8], token: [UInt8], kind: Kind,
                environment: String?, creationTime: Double, riskMetric: Int?, notBefore: Double?, expirationTime: Double) {
        self.bytes = bytes
        self.appId = appId
        self.attestedCertificate = attestedCertificate
        self.clientHash = clientHash
        self.token = token
        self.kind = kind
        self.environment = environment
        self.creationTime = creationTime
        self.riskMetric = riskMetric
        self.notBefore = notBefore
        self.expirationTime = expirationTime
    }
}
