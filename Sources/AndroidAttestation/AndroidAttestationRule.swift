/// The rule a refused Android Key Attestation or assertion broke, one per check, in SPEC §10's order, named for
/// the log line (docs/issuer.md "Android").
public enum AndroidAttestationRule: String, Sendable, Hashable, CaseIterable {
    /// The chain is empty, longer than `AndroidAttestationVerifier.maxChainLength`, or a certificate is not
    /// one DER X.509 certificate of at most 16 KiB.
    case chainMalformed = "android_chain_malformed"
    /// The chain does not verify to a pinned root at the current time.
    case chainUntrusted = "android_chain_untrusted"
    /// A certificate's serial is REVOKED in the attestation status list.
    case certificateRevoked = "android_certificate_revoked"
    /// A certificate's serial is SUSPENDED in the attestation status list.
    case certificateSuspended = "android_certificate_suspended"
    /// No certificate carries a KeyDescription, or one carries it twice.
    case keyDescriptionMissing = "android_key_description_missing"
    /// A certificate above the first one carrying a KeyDescription carries one too.
    case keyDescriptionRepeated = "android_key_description_repeated"
    /// The KeyDescription does not parse (`DERReader`, strict).
    case keyDescriptionMalformed = "android_key_description_malformed"
    /// The certificate carrying the KeyDescription is not the leaf (its key is then not the attested key).
    case keyDescriptionNotLeaf = "android_key_description_not_leaf"
    /// The key's `origin` is not GENERATED.
    case origin = "android_origin"
    /// `attestationChallenge` is not the challenge.
    case challenge = "android_challenge"
    /// A security level is Software.
    case securityLevel = "android_security_level"
    /// The app requires StrongBox and a level is TrustedEnvironment.
    case strongBoxRequired = "android_strongbox_required"
    /// No hardware-enforced root of trust, or the bootloader is unlocked.
    case deviceUnlocked = "android_device_unlocked"
    /// The verified boot state is not Verified.
    case bootNotVerified = "android_boot_not_verified"
    /// No attestation application id, or it does not name the app's package.
    case packageName = "android_package_name"
    /// No signing certificate digest of the attestation application id is one of the app's.
    case signingCertificate = "android_signing_certificate"
    /// `osPatchLevel` is missing or older than the app's minimum.
    case patchLevel = "android_patch_level"
    /// The attested key is not an EC P-256 key (the issuer's assertions are ECDSA P-256 with SHA-256).
    case attestedKey = "android_attested_key"
}
