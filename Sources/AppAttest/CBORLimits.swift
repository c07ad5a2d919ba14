/// Caps for `CBORDecoder`, so hostile input costs bounded memory and time.
public struct CBORLimits: Sendable, Equatable {
    /// Deepest nesting of arrays and maps; the top-level item is depth 1. An attestation needs 3
    /// (map → attStmt map → x5c array); the default leaves room for nested values in iOS 27 extension maps.
    public var maxDepth: Int
    /// Most items (every integer, string, array, map, key and value counts one) in one decode.
    public var maxItems: Int
    /// Largest input, and so largest declared string length. Real attestations are 5–6 KB.
    public var maxBytes: Int

    /// Makes limits; see the properties for their meaning.
    public init(maxDepth: Int, maxItems: Int, maxBytes: Int) {
        self.maxDepth = maxDepth
        self.maxItems = maxItems
        self.maxBytes = maxBytes
    }

    /// Depth 8, 512 items, 64 KiB: the limits for attestation and assertion objects and the CBOR inside
    /// authenticator data. An exchange body is capped at 64 KiB, so no genuine object comes near them.
    public static let appAttest = CBORLimits(maxDepth: 8, maxItems: 512, maxBytes: 65_536)
}
