/// Caps for `DERReader`, so hostile input costs bounded memory and time.
public struct DERLimits: Sendable, Equatable {
    /// Deepest nesting of constructed elements; the top-level element is depth 1. A KeyDescription needs 5
    /// (KeyDescription → AuthorizationList → [704] → RootOfTrust → its fields); the attestation application id,
    /// parsed on its own, needs 4.
    public var maxDepth: Int
    /// Largest input, and so largest declared length.
    public var maxBytes: Int
    /// Largest tag number; KeyDescription's highest defined tag is 724, so three base-128 bytes are ample.
    public var maxTagNumber: UInt32

    /// Makes limits; see the properties for their meaning.
    public init(maxDepth: Int, maxBytes: Int, maxTagNumber: UInt32) {
        self.maxDepth = maxDepth
        self.maxBytes = maxBytes
        self.maxTagNumber = maxTagNumber
    }

    /// Depth 8, 16 KiB, tag numbers up to 2^21 − 1: the limits for a KeyDescription extension. Real ones are
    /// 200–1,500 bytes; a certificate is capped at 16 KiB before its extension is read.
    public static let keyDescription = DERLimits(maxDepth: 8, maxBytes: 16_384, maxTagNumber: (1 << 21) - 1)
}
