/// What a valid App Check token must say (docs/behaviour.md checks 6 and 8), from the `app_check` config.
///
/// Immutable, and a class so that handing it on costs one reference count, not one per member (the gateway passes
/// the runtime's policy along with every token it verifies).
public final class AppCheckPolicy: Sendable {
    /// The Firebase project number; the issuer and the first audience are built from it.
    public let projectNumber: String
    /// The Firebase project id; when set, `aud` must also contain `projects/<projectId>`.
    public let projectId: String?
    /// Allowed App IDs (the `sub` claim); empty means any.
    public let appIds: Set<String>
    /// Tolerance in seconds for `exp`, `iat` and `nbf`. Default 10.
    public let clockSkew: Double
    /// Largest accepted `exp - iat`, in seconds. Default 7 days.
    public let maxLifetime: Double
    /// On replay-protected routes, largest accepted `exp - iat`, in seconds. Default 300 (5 minutes).
    public let limitedUseMaxTTL: Double

    /// `https://firebaseappcheck.googleapis.com/<projectNumber>`, compared byte for byte with `iss`.
    public let issuer: String
    /// The audiences `aud` must contain: `projects/<projectNumber>`, then `projects/<projectId>` when set.
    public let requiredAudiences: [String]

    /// Default `clockSkew`: 10 seconds.
    public static let defaultClockSkew: Double = 10
    /// Default `maxLifetime`: 7 days.
    public static let defaultMaxLifetime: Double = 7 * 24 * 3600
    /// Default `limitedUseMaxTTL`: 5 minutes.
    public static let defaultLimitedUseMaxTTL: Double = 300

    /// Builds a policy; the caller (config validation) makes sure the numbers are non-negative.
    public init(projectNumber: String, projectId: String? = nil, appIds: Set<String> = [],
                clockSkew: Double = defaultClockSkew, maxLifetime: Double = defaultMaxLifetime,
                limitedUseMaxTTL: Double = defaultLimitedUseMaxTTL, issuer: String? = nil) {
        self.projectNumber = projectNumber
        self.projectId = projectId
        self.appIds = appIds
        self.clockSkew = clockSkew
        self.maxLifetime = maxLifetime
        self.limitedUseMaxTTL = limitedUseMaxTTL
        self.issuer = issuer ?? Self.firebaseIssuer(projectNumber: projectNumber)
        self.requiredAudiences = ["projects/" + projectNumber] + (projectId.map { ["projects/" + $0] } ?? [])
    }

    /// Firebase's `iss` for a project: `https://firebaseappcheck.googleapis.com/<project_number>`.
    public static func firebaseIssuer(projectNumber: String) -> String {
        "https://firebaseappcheck.googleapis.com/" + projectNumber
    }

    /// The same rules for tokens of another key set, whose `iss` must be `issuer` (docs/behaviour.md step 6: a key
    /// vouches only for its own issuer).
    /// `limitedUseMaxTTL`, when given, replaces this policy's (the gateway's own issuer mints limited-use tokens with
    /// its `limited_use_ttl`, up to an hour).
    public func withIssuer(_ issuer: String, limitedUseMaxTTL: Double? = nil) -> AppCheckPolicy {
        AppCheckPolicy(projectNumber: projectNumber, projectId: projectId, appIds: appIds, clockSkew: clockSkew,
                       maxLifetime: maxLifetime, limitedUseMaxTTL: limitedUseMaxTTL ?? self.limitedUseMaxTTL, issuer: issuer)
    }

    /// True when `sub` is allowed: the list is empty, or holds exactly these UTF-8 bytes.
    public func allows(appId sub: String) -> Bool {
        if appIds.isEmpty { return true }
        guard let index = appIds.firstIndex(of: sub) else { return false }
        return utf8Equal(appIds[index], sub)
    }
}
