/// "Can I turn enforcement on for this route yet?" (docs/dashboard.md), decided from one window's counts.
///
/// Precedence, first match wins (docs/dashboard.md):
/// 1. `not enough traffic`: fewer than `min_requests` requests — shares of a handful of requests mean nothing.
/// 2. `investigate`: invalid + unknown origin above 1% — possible abuse comes before everything else.
/// 3. `wait`: outdated clients above 1% — enforcing now would lock out old app versions still in use.
/// 4. `wait`: reused tokens above 1% — replays, or clients resending limited-use tokens; `alert` is set, so the page
///    shows it as loudly as `investigate` (docs/dashboard.md).
/// 5. `ready to enforce`: verified share at or above `ready_share`.
/// 6. otherwise `wait`: below the bar without a single dominant cause.
struct DashboardVerdict: Sendable, Equatable {
    enum Kind: String, Sendable {
        case ready = "ready to enforce"
        case wait = "wait"
        case investigate = "investigate"
        case notEnoughTraffic = "not enough traffic"
    }

    /// The 1% thresholds of docs/dashboard.md.
    static let outdatedLimit = 0.01
    static let suspiciousLimit = 0.01
    /// Reused tokens above this share are named in the verdict and raise `alert`.
    static let reusedLimit = 0.01

    var kind: Kind
    /// One sentence with the numbers behind the verdict.
    var because: String
    var total: Int
    var verifiedShare: Double
    var outdatedShare: Double
    /// invalid + unknown_origin.
    var suspiciousShare: Double
    var reusedShare: Double
    /// Needs a look now: `investigate`, or reused tokens above `reusedLimit` (the page colours both red).
    var alert: Bool { kind == .investigate || (kind != .notEnoughTraffic && reusedShare > Self.reusedLimit) }

    /// `counts` by `DashboardHistory.categories` index.
    init(counts: [Int], minRequests: Int, readyShare: Double) {
        let total = counts.reduce(0, +)
        func share(_ n: Int) -> Double { total > 0 ? Double(n) / Double(total) : 0 }
        let at = { (category: DashboardCategory) -> Int in
            counts.indices.contains(category.rawValue) ? counts[category.rawValue] : 0
        }
        self.total = total
        verifiedShare = share(at(.verified))
        outdatedShare = share(at(.outdatedClient))
        suspiciousShare = share(at(.invalid) + at(.unknownOrigin))
        reusedShare = share(at(.reused))
        let pct = { (x: Double) in Self.percent(x) }
        if total < minRequests {
            kind = .notEnoughTraffic
            because = "\(Self.requests(total)), fewer than min_requests \(minRequests)"
        } else if suspiciousShare > Self.suspiciousLimit {
            kind = .investigate
            because = "invalid + unknown origin \(pct(suspiciousShare)) > 1% of \(Self.requests(total))"
        } else if outdatedShare > Self.outdatedLimit {
            kind = .wait
            because = "outdated clients \(pct(outdatedShare)) > 1% of \(Self.requests(total))"
        } else if reusedShare > Self.reusedLimit {
            kind = .wait
            because = "reused \(pct(reusedShare)) > 1% of \(Self.requests(total)): replayed tokens, or clients resending limited-use tokens"
        } else if verifiedShare >= readyShare {
            kind = .ready
            because = "verified \(pct(verifiedShare)) ≥ ready_share \(pct(readyShare)) of \(Self.requests(total))"
        } else {
            kind = .wait
            because = "verified \(pct(verifiedShare)) < ready_share \(pct(readyShare)) of \(Self.requests(total))"
        }
    }

    /// "1 request", "12 requests".
    static func requests(_ n: Int) -> String { n == 1 ? "1 request" : "\(n) requests" }

    /// "99.25%": two decimals, enough to tell 99.0% from 98.99%.
    static func percent(_ x: Double) -> String {
        let hundredths = Int((x * 10000).rounded())
        let frac = hundredths % 100
        return "\(hundredths / 100).\(frac < 10 ? "0" : "")\(frac)%"
    }
}
