import AppAttest

/// `issuer.apps[].app_attest.risk`: how often each key's receipt is exchanged with Apple's `attestationData`
/// endpoint for a fresh risk metric (docs/issuer.md "Fraud risk"). Used only when the app has `device_check`.
public struct ReceiptRefreshSettings: Sendable {
    /// Seconds between refreshes of one key; 0 = never refresh. At least an hour (Apple refreshes daily).
    public var refresh: Double = 86_400
    /// Base URL of Apple's App Attest data API; empty = Apple's host for the key's environment.
    public var apiURL: String = ""
    public init() {}

    /// `api_url`, or Apple's host for a key made in `environment`.
    public func effectiveAPIURL(_ environment: AppAttestEnvironment) -> String {
        if !apiURL.isEmpty { return apiURL }
        return environment == .production ? "https://data.appattest.apple.com" : "https://data-development.appattest.apple.com"
    }
}
