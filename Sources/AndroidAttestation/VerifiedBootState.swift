/// RootOfTrust's `verifiedBootState` ENUMERATED.
public enum VerifiedBootState: Int64, Sendable, Equatable {
    /// The boot chain is verified to a key built into the device (a stock, locked OS).
    case verified = 0
    /// Verified to a user-installed key (a custom OS with a re-locked bootloader).
    case selfSigned = 1
    /// Not verified: the bootloader is unlocked.
    case unverified = 2
    /// Verification failed.
    case failed = 3
}
