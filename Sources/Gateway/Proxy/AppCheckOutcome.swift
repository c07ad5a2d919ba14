/// The result of the App Check step for one request, as logged and forwarded.
struct AppCheckOutcome {
    /// `X-AppCheck-Status`; its text only where a header or a log line is written.
    enum Status: UInt8, CaseIterable {
        case verified, missing, invalid, reused, skipped

        var name: String {
            switch self {
            case .verified: "verified"
            case .missing: "missing"
            case .invalid: "invalid"
            case .reused: "reused"
            case .skipped: "skipped"
            }
        }
    }

    /// Firebase's request category (docs/operations.md); the raw value is its index in `LoopMetrics.outcomes`, so
    /// metrics count it without looking at text.
    enum Category: UInt8, CaseIterable {
        case verified, outdatedClient, unknownOrigin, invalid, reused, skipped

        var name: String {
            switch self {
            case .verified: "verified"
            case .outdatedClient: "outdated_client"
            case .unknownOrigin: "unknown_origin"
            case .invalid: "invalid"
            case .reused: "reused"
            case .skipped: "skipped"
            }
        }
    }

    var status: Status
    var outcome: Category
    var reason: String?
    var appId: String?
    /// First 16 hex chars of SHA-256 of the token, for logs.
    var tokenSHA256: String?
    /// The DPoP rule a refused proof failed (SPEC §4.4: `typ`, `alg`, …), for the log line.
    var dpopRule: String? = nil
    /// The token was bound to a key and its proof passed (counted per route: the bound share).
    var bound = false

    static let skipped = AppCheckOutcome(status: .skipped, outcome: .skipped)
}
