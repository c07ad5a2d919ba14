/// An App Attest key the issuer has accepted (docs/issuer.md): stored at attestation, read and advanced at assertion.
public struct AttestedKey: Sendable, Equatable {
    /// SHA-256 of the uncompressed P-256 point (App Attest's key ID).
    public var keyId: [UInt8]
    public var appId: String
    /// The uncompressed P-256 public point (65 bytes, `04 ‖ X ‖ Y`).
    public var publicKey: [UInt8]
    /// The highest assertion counter accepted (0 right after attestation: the attestation's own).
    public var counter: UInt32
    /// The counters accepted just below `counter` (`CounterWindow`): bit k set means `counter - 1 - k` was
    /// accepted. 0 at attestation.
    public var counterWindow: UInt64
    /// `production` or `development` (from the AAGUID).
    public var environment: String
    /// Apple's receipt from the attestation, kept for fraud-risk checks.
    public var receipt: [UInt8]
    /// Seconds since the Unix epoch.
    public var attestedAt: Double
    /// The risk metric of the latest verified receipt (field 17), `nil` while unknown (docs/issuer.md "Fraud risk").
    public var riskMetric: Int? = nil
    /// The stored receipt's not-before (field 19): Apple refreshes it no earlier.
    public var receiptNotBefore: Double? = nil
    /// When the receipt refresher should next exchange this key's receipt; `nil`: never (no receipt, or none to refresh).
    public var receiptRefreshAt: Double? = nil

    public init(keyId: [UInt8], appId: String, publicKey: [UInt8], counter: UInt32, counterWindow: UInt64 = 0,
                environment: String, receipt: [UInt8], attestedAt: Double, riskMetric: Int? = nil,
                receiptNotBefore: Double? = nil, receiptRefreshAt: Double? = nil) {
        self.riskMetric = riskMetric
        self.receiptNotBefore = receiptNotBefore
        self.receiptRefreshAt = receiptRefreshAt
        self.keyId = keyId
        self.appId = appId
        self.publicKey = publicKey
        self.counter = counter
        self.counterWindow = counterWindow
        self.environment = environment
        self.receipt = receipt
        self.attestedAt = attestedAt
    }
}

/// What the store decided about an assertion counter (`IssuerState.acceptCounter`).
public enum CounterVerdict: Sendable, Equatable {
    /// Never accepted before for this key and within the window: recorded, the assertion may mint.
    case accepted
    /// Already accepted once (the highest, or a counter marked in the window).
    case repeated
    /// More than `CounterWindow.size` below the highest accepted: too old to tell, refused.
    case belowWindow
    /// No such key, or the key belongs to another app.
    case unknownKey
}

/// What the store decided about a new challenge (`IssuerState.putChallenge`).
public enum ChallengeAdmission: Sendable, Equatable {
    /// Remembered until it expires or is taken.
    case stored
    /// The client address already holds `maxPerAddress` outstanding challenges.
    case addressFull
    /// The store holds as many outstanding challenges as it may (for everyone).
    case storeFull
}

/// The store could not answer (docs/issuer.md: 503 `UNAVAILABLE`, nothing minted). A full store is not an error:
/// it is `ChallengeAdmission.storeFull`.
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
    /// Remembers a fresh challenge for `appId` until `expiresAt`, unless `address` (an opaque client key: the
    /// IPv4 /32 or IPv6 /64 prefix) already holds `maxPerAddress` outstanding challenges (0: no per-address
    /// bound) or the store is at its global cap. Taking a challenge, or its expiry, frees the address's slot.
    func putChallenge(_ challenge: [UInt8], appId: String, address: String, now: Double, expiresAt: Double,
                      maxPerAddress: Int) async throws(IssuerStateError) -> ChallengeAdmission

    /// Takes the challenge away (single use: it is gone after this call whatever the exchange then decides)
    /// and says whether it existed for `appId` and had not expired at `now`.
    func takeChallenge(_ challenge: [UInt8], appId: String, now: Double) async throws(IssuerStateError) -> Bool

    /// Stores a newly attested key unless one with its ID exists; true when stored.
    func insertKey(_ key: AttestedKey) async throws(IssuerStateError) -> Bool

    /// The attested key `keyId` of `appId`, if any.
    func key(_ keyId: [UInt8], appId: String) async throws(IssuerStateError) -> AttestedKey?

    /// Records assertion counter `counter` for the key (`CounterWindow`): accepted when it was never accepted
    /// for this key and is at most 64 below the highest accepted. One atomic step in the store, so one counter
    /// value is accepted at most once, across instances sharing the store.
    func acceptCounter(_ keyId: [UInt8], appId: String, counter: UInt32) async throws(IssuerStateError) -> CounterVerdict

    /// Records a one-time input (the SHA-256 of a device token or custom token) until `expiresAt`; true the
    /// first time, false when it was already recorded and has not expired.
    func consumeOnce(_ digest: [UInt8], expiresAt: Double, now: Double) async throws(IssuerStateError) -> Bool
}
