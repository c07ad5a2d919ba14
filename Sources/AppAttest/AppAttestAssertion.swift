/// A verified App Attest assertion: signature and rpIdHash checked; the counter is for the caller's
/// compare-and-set (`AppAttestCounter`).
public struct AppAttestAssertion: Sendable, Equatable {
    /// The signature counter the device presented.
    public let counter: UInt32
    /// The authenticator data's extensions map (iOS 27 and later), if any.
    public let extensions: CBORMap?
}
