/// Android Key Attestation's KeyDescription, the value of certificate extension OID 1.3.6.1.4.1.11129.2.1.17
/// (source.android.com, "Key and ID attestation"; schema versions 1 to 400).
///
/// ```
/// KeyDescription ::= SEQUENCE {
///   attestationVersion INTEGER, attestationSecurityLevel SecurityLevel,
///   keyMintVersion INTEGER, keyMintSecurityLevel SecurityLevel,
///   attestationChallenge OCTET STRING, uniqueId OCTET STRING,
///   softwareEnforced AuthorizationList, hardwareEnforced AuthorizationList }
/// ```
/// Parsed strictly by `DERReader` under `DERLimits.keyDescription` (16 KiB, depth 8): nothing may follow
/// `hardwareEnforced`, and an unknown security level is refused.
public struct KeyDescription: Sendable, Equatable {
    /// The extension's OID, dotted.
    public static let oid = "1.3.6.1.4.1.11129.2.1.17"

    /// Attestation schema version (1, 2, 3, 4, 100, 200, 300, 400).
    public let attestationVersion: Int64
    /// Where the attestation was signed.
    public let attestationSecurityLevel: SecurityLevel
    /// Keymaster/KeyMint version.
    public let keyMintVersion: Int64
    /// Where the key lives.
    public let keyMintSecurityLevel: SecurityLevel
    /// The challenge the app passed to `setAttestationChallenge` (at most 128 bytes on devices).
    public let attestationChallenge: [UInt8]
    /// The unique id (empty unless the app is privileged).
    public let uniqueID: [UInt8]
    /// What the OS enforces.
    public let softwareEnforced: AuthorizationList
    /// What the TEE or StrongBox enforces.
    public let hardwareEnforced: AuthorizationList

    /// Parses the extension value `der`.
    public init(der: [UInt8], limits: DERLimits = .keyDescription) throws(DERError) {
        var top = try DERReader(der, limits: limits)
        let sequence = try top.next(.sequence)
        try top.expectEnd()
        var fields = try top.children(of: sequence)
        attestationVersion = try fields.readInteger()
        attestationSecurityLevel = try Self.securityLevel(&fields)
        keyMintVersion = try fields.readInteger()
        keyMintSecurityLevel = try Self.securityLevel(&fields)
        attestationChallenge = try fields.readOctetString()
        uniqueID = try fields.readOctetString()
        softwareEnforced = try AuthorizationList(reading: &fields, limits: limits)
        hardwareEnforced = try AuthorizationList(reading: &fields, limits: limits)
        try fields.expectEnd()
    }

    private static func securityLevel(_ reader: inout DERReader) throws(DERError) -> SecurityLevel {
        let start = reader.position
        guard let level = SecurityLevel(rawValue: try reader.readInteger(.enumerated)) else {
            throw DERError(.invalidValue, at: start)
        }
        return level
    }

    /// The attestation application id, from `softwareEnforced` where Android puts it, else `hardwareEnforced`.
    public var attestationApplicationID: AttestationApplicationID? {
        softwareEnforced.attestationApplicationID ?? hardwareEnforced.attestationApplicationID
    }
}
