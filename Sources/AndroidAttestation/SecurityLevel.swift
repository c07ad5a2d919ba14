/// Where a key (or its attestation) lives: KeyDescription's `SecurityLevel` ENUMERATED.
public enum SecurityLevel: Int64, Sendable, Equatable {
    /// Android's software Keystore: no hardware protection, and the attestation proves nothing.
    case software = 0
    /// The Trusted Execution Environment (TEE).
    case trustedEnvironment = 1
    /// A separate secure element (StrongBox).
    case strongBox = 2
}
