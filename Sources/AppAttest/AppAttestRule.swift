/// The rule a refused attestation or assertion broke, one per check, named for the log line (docs/issuer.md).
///
/// `malformed` is the only rule about the shape of the input (HTTP 400 upstream); every other one is a
/// refusal of well-formed evidence (HTTP 403).
public enum AppAttestRule: String, Sendable, Hashable, CaseIterable {
    /// The object is not the expected CBOR structure, or its authenticator data does not parse.
    case malformed
    /// `fmt` is not `apple-appattest`.
    case format = "fmt"
    /// `attStmt.x5c` does not hold exactly two certificates.
    case certificateCount = "x5c_count"
    /// A certificate does not parse, or the chain does not verify to the pinned root at the given time.
    case certificateChain = "chain"
    /// The leaf's nonce extension (`1.2.840.113635.100.8.2`) is missing, not the exact DER, or differs from
    /// SHA-256(authData ‖ clientDataHash).
    case nonce
    /// The leaf key is not an uncompressed P-256 point, or its SHA-256 is not the key ID.
    case keyId = "key_id"
    /// The authenticator data's rpIdHash is not SHA-256 of `<team_id>.<bundle_id>`.
    case rpIdHash = "rp_id_hash"
    /// The attestation's counter is not 0.
    case counter
    /// The AAGUID is neither App Attest value.
    case aaguid
    /// The AAGUID names an environment the app does not allow.
    case environment
    /// The credential ID is not the key ID.
    case credentialId = "credential_id"
    /// The stored public key is not a valid P-256 point (a state-store problem, not the client's).
    case storedKey = "stored_key"
    /// The assertion's signature does not verify with the stored key.
    case signature
    /// The assertion's counter is not strictly greater than the stored one (checked by `AppAttestCounter`).
    case counterNotIncreasing = "counter_not_increasing"

    /// True for `malformed`: the input's shape, not the evidence, is wrong.
    public var isMalformedInput: Bool { self == .malformed }
}
