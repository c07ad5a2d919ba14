/// KeyDescription's `RootOfTrust` (tag [704]): the state of verified boot when the key was attested.
public struct RootOfTrust: Sendable, Equatable {
    /// The key that verified the boot image (a hash of it on recent devices).
    public let verifiedBootKey: [UInt8]
    /// Whether the bootloader is locked.
    public let deviceLocked: Bool
    /// The verified boot state.
    public let verifiedBootState: VerifiedBootState
    /// A digest of the verified boot data (attestation version 3 and later), `nil` before.
    public let verifiedBootHash: [UInt8]?

    /// Parses `RootOfTrust ::= SEQUENCE { verifiedBootKey OCTET STRING, deviceLocked BOOLEAN,
    /// verifiedBootState ENUMERATED, verifiedBootHash OCTET STRING OPTIONAL }`, nothing after.
    init(reading reader: inout DERReader) throws(DERError) {
        let sequence = try reader.next(.sequence)
        var fields = try reader.children(of: sequence)
        verifiedBootKey = try fields.readOctetString()
        deviceLocked = try fields.readBoolean()
        let stateStart = fields.position
        guard let state = VerifiedBootState(rawValue: try fields.readInteger(.enumerated)) else {
            throw DERError(.invalidValue, at: stateStart)
        }
        verifiedBootState = state
        verifiedBootHash = fields.isAtEnd ? nil : try fields.readOctetString()
        try fields.expectEnd()
    }
}
