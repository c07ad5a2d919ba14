/// The `provider` claim of a token minted by the gateway's own issuer (docs/issuer.md): which exchange made it.
public enum MintedTokenProvider: String, Sendable, CaseIterable {
    /// `exchangeAppAttestAttestation` or `exchangeAppAttestAssertion`.
    case appAttest = "app_attest"
    /// `exchangeAndroidKeyAttestation` or `exchangeAndroidKeyAssertion`.
    case androidKey = "android_key"
    /// `exchangeDeviceCheckToken`.
    case deviceCheck = "device_check"
    /// `exchangeDebugToken`.
    case debug
    /// `exchangeCustomToken`.
    case custom
}
