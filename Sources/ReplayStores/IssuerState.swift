/// An App Attest key the issuer has accepted (docs/issuer.md): stored at attestation, read and advanced at assertion.
public struct AttestedKey: Sendable, Equatable {
    /// SHA-256 of the uncompressed P-256 point (App Attest's key ID).
    public var keyId: [UInt8]
    public var appId: String
    /// The uncompressed P-256 public point (65 bytes, `04 ‖ X ‖ Y`).
    public var publicKey: [UInt8]
    /// The last assertion counter accepted (0 right after attestation).
    public var counter: UInt32
    /// `production` or `development` (from the AAGUID).
    public var environment: String
    /// Apple's receipt from the attestation, kept for fraud-risk checks.
    public var receipt: [UInt8]
    /// Seconds since the Unix epoch.
    public var attestedAt: Double

    public init(keyId: [UInt8], appId: String, publicKey: [UInt8], counter: UInt32, environment: String,
                receipt: [UInt8], attestedAt: Double) {
        self.keyId = keyId
        self.appId = appId
        self.publicKey = publicKey
        self.counter = counter
        self.environment = environment
        self.receipt = receipt
        self.attestedAt = attestedAt
    }
}

/// The store could not answer (docs/issuer.md: 503 `UNAVAILABLE`, nothing minted).
public struct IssuerStateError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The issuer's state (docs/issuer.md "State"): challenges, attested keys with their counters, and used one-time
/// inputs (device tokens, custom tokens). Every operation that decides "first use wins" is one atomic step in
/// the store, so two gateway instances on one store can never both accept the same input.
///
/// Implementations: `MemoryIssuerState` (one process, lost on restart); SQLite and Redis (durable, shared)
/// sit behind the same protocol.
public protocol IssuerState: AnyObject, Sendable {
    /// Remembers a fresh challenge for `appId` until `expiresAt`.
    func putChallenge(_ challenge: [UInt8], appId: String, now: Double, expiresAt: Double) async throws(IssuerStateError)

    /// Takes the challenge away (single use: it is gone after this call whatever the exchange then decides)
    /// and says whether it existed for `appId` and had not expired at `now`.
    func takeChallenge(_ challenge: [UInt8], appId: String, now: Double) async throws(IssuerStateError) -> Bool

    /// Stores a newly attested key unless one with its ID exists; true when stored.
    func insertKey(_ key: AttestedKey) async throws(IssuerStateError) -> Bool

    /// The attested key `keyId` of `appId`, if any.
    func key(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) -> AttestedKey?

    /// Compare-and-set: sets the key's counter to `counter` only when the stored counter is lower; true when
    /// it did. Two assertions with the same counter can never both get `true`.
    func advanceCounter(_ keyId: [UInt8], appId: String, to counter: UInt32) async throws(IssuerStateError) -> Bool

    /// Records a one-time input (the SHA-256 of a device token or custom token) until `expiresAt`; true the
    /// first time, false when it was already recorded and has not expired.
    func consumeOnce(_ digest: [UInt8], expiresAt: Double, now: Double) async throws(IssuerStateError) -> Bool
}
