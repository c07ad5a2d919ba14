/// What an accepted Android attestation proves: the attested EC P-256 key and what the device said about it.
public struct AndroidAttestedKey: Sendable, Equatable {
    /// The key as an uncompressed X9.62 point, `04 ‖ X ‖ Y` (65 bytes).
    public let uncompressedPoint: [UInt8]
    /// The parsed KeyDescription of the leaf.
    public let keyDescription: KeyDescription
}
