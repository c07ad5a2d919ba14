import AppAttest
import Foundation
import ReplayStores

/// The `issuer:` section (the self-hosted App Check provider), validated. Present only when the section is
/// written. Every file it names was readable and of the right kind when the configuration was loaded.
public struct IssuerSettings: Sendable {
    /// The API lives at `<basePath>/v1/projects/{project}/apps/{app_id}:{method}` and the key set at
    /// `<basePath>/v1/jwks`. Starts with `/`, no trailing `/`. Default `/appcheck`.
    public var basePath: String = "/appcheck"
    /// Tokens carry `iss = <issuerURL>/<project_number>`. An `https://` (or `http://`) URL without a trailing
    /// `/`, query or fragment. Required.
    public var issuerURL: String = ""
    /// RSA 2048–4096 PEM private keys; the first signs, all are published. At least one.
    public var signingKeyPaths: [String] = []
    /// Lifetime of session tokens (30m..7d, default 1h).
    public var sessionTTL: Double = 3600
    /// Lifetime of limited-use tokens (1m..1h, default 5m).
    public var limitedUseTTL: Double = 300
    /// Lifetime of an App Attest challenge (10s..1h, default 5m).
    public var challengeTTL: Double = 300
    /// Where challenges, attested keys and used exchange inputs live.
    public var state = IssuerStateSettings()
    /// Exchanges (including challenge requests) admitted per second per process; beyond it 429
    /// (1..1,000,000, default 200).
    public var maxExchangesPerSecond: Int = 200
    /// Exchanges admitted per second from one client address (IPv4 /32, IPv6 /64), burst twice that; beyond it
    /// 429 for that address only (0 = off, 1..1,000,000, default 20).
    public var maxExchangesPerAddress: Int = 20
    /// App Attest challenges one client address may hold outstanding, in every state store (0 = off, default 1,000).
    public var maxChallengesPerAddress: Int = 1000
    /// The apps this issuer mints tokens for, in file order; App IDs are unique.
    public var apps: [IssuerAppSettings] = []
    /// Backends whose short-lived JWTs `exchangeCustomToken` accepts; `iss` values are unique.
    public var customTokenIssuers: [CustomTokenIssuerSettings] = []

    public init() {}

    /// `iss` of the tokens this issuer mints for `projectNumber`.
    public func tokenIssuer(projectNumber: String) -> String { "\(issuerURL)/\(projectNumber)" }

    /// The exchange methods `app` can use: those its own section enables, and `exchangeCustomToken` when
    /// `custom_token_issuers` is set (a custom token names its app).
    public func methods(for app: IssuerAppSettings) -> [String] {
        app.methods + (customTokenIssuers.isEmpty ? [] : ["exchangeCustomToken"])
    }

    /// Warnings about apps whose tokens no route would accept: an app minted for here but missing from a non-empty
    /// `app_check.app_ids` (every enforce route refuses its tokens as `app_not_allowed`). One line per app.
    public func warnings(allowedAppIds: [String]) -> [String] {
        guard !allowedAppIds.isEmpty else { return [] }
        let allowed = Set(allowedAppIds)
        return apps.filter { !allowed.contains($0.appId) }.map {
            "warning: issuer app \($0.appId) is not in app_check.app_ids: enforce routes refuse the tokens minted for it (app_not_allowed)"
        }
    }

    /// The app with this App ID, if configured.
    public func app(_ appId: String) -> IssuerAppSettings? { apps.first { $0.appId == appId } }
}

/// `issuer.state`: like `replay`, read at start only.
public struct IssuerStateSettings: Sendable {
    public var store: ReplayStoreKind = .memory
    public var sqlitePath: String = "/var/lib/appcheck-gateway/issuer.sqlite"
    public var redisURL: String = "redis://127.0.0.1:6379/0"
    public var keyPrefix: String = "appcheck:issuer:"
    public init() {}
}

/// One `issuer.apps[]` entry.
public struct IssuerAppSettings: Sendable {
    /// `1:<project_number>:<ios|android|web>:<hex>`; its project number is `app_check.project_number`.
    public var appId: String
    /// Apple Developer Team ID (10 upper-case letters or digits); required for App Attest and DeviceCheck.
    public var teamId: String?
    /// The app's bundle identifier; required for App Attest and DeviceCheck.
    public var bundleId: String?
    public var appAttest: AppAttestAppSettings?
    public var deviceCheck: DeviceCheckAppSettings?
    /// Android Key Attestation (`android:`); nil when not enabled.
    public var android: AndroidAppSettings?
    /// Secrets accepted by `exchangeDebugToken`, each at least 22 characters (128 bits as base64). Never logged.
    public var debugSecrets: [String] = []
    /// Per-app overrides of the issuer's TTLs.
    public var sessionTTL: Double?
    public var limitedUseTTL: Double?
    /// Exchanges of this app admitted per second (under the process ceiling); nil = the ceiling only.
    public var maxExchangesPerSecond: Int?
    /// App Attest fraud risk: assertions from keys whose latest risk metric is above this are refused; 0 = off.
    public var maxRiskMetric: Int = 0
    /// Refuse assertions from keys whose risk metric is unknown (only with `max_risk_metric`).
    public var requireRiskMetric = false
    /// `require_dpop`: exchanges without a DPoP proof are refused (400), so every token minted is bound (SPEC §10).
    public var requireDPoP = false

    public init(appId: String) { self.appId = appId }

    /// `<team_id>.<bundle_id>`, the App Attest relying-party ID, when both are set.
    public var rpId: String? {
        guard let teamId, let bundleId else { return nil }
        return "\(teamId).\(bundleId)"
    }

    /// The exchange methods this app can use, in the order docs/issuer.md lists them.
    public var methods: [String] {
        var methods: [String] = []
        if appAttest != nil {
            methods += ["generateAppAttestChallenge", "exchangeAppAttestAttestation", "exchangeAppAttestAssertion"]
        }
        if android != nil {
            methods += ["generateAndroidKeyChallenge", "exchangeAndroidKeyAttestation", "exchangeAndroidKeyAssertion"]
        }
        if deviceCheck != nil { methods.append("exchangeDeviceCheckToken") }
        if !debugSecrets.isEmpty { methods.append("exchangeDebugToken") }
        return methods
    }
}

public struct AppAttestAppSettings: Sendable {
    /// Allowed environments; at least one, no repeats.
    public var environments: [AppAttestEnvironment] = [.production]
    /// A PEM root certificate replacing Apple's built-in App Attestation Root CA (tests, demos); nil = Apple's.
    public var rootCAFile: String?
    /// A PEM root certificate replacing Apple Root CA - G3 for receipts (tests, demos); nil = Apple's.
    public var receiptRootCAFile: String?
    /// `risk:`, the receipt refresher (docs/issuer.md "Fraud risk"); it runs only with `device_check` set.
    public var risk = ReceiptRefreshSettings()
    public init() {}
}

public struct DeviceCheckAppSettings: Sendable {
    /// The 10-character Key ID of the `.p8` key (the JWT's `kid`).
    public var keyId: String
    /// A PKCS#8 P-256 private key (`AuthKey_<key_id>.p8`).
    public var privateKeyPath: String
    public var environment: AppAttestEnvironment = .production
    /// Base URL of Apple's DeviceCheck API; empty = Apple's host for `environment`.
    public var apiURL: String = ""

    public init(keyId: String, privateKeyPath: String) {
        self.keyId = keyId
        self.privateKeyPath = privateKeyPath
    }

    /// `api_url`, or Apple's host for the environment.
    public var effectiveAPIURL: String {
        if !apiURL.isEmpty { return apiURL }
        return environment == .production ? "https://api.devicecheck.apple.com"
                                          : "https://api.development.devicecheck.apple.com"
    }
}

public struct CustomTokenIssuerSettings: Sendable {
    /// The `iss` a custom token must carry.
    public var iss: String
    /// Where its JWKS is (`https://`, `http://` or `file://`).
    public var jwksURL: String
    public init(iss: String, jwksURL: String) {
        self.iss = iss
        self.jwksURL = jwksURL
    }
}
