/// `StrictJSON`'s entry points for the fuzz targets (`@_spi(Fuzzing)`).
extension StrictJSON {
    /// For the `json` fuzz target, which compares the two parsers: what the token parser's one pass
    /// (`scanObject`, with the payload's claim slots) makes of `bytes` — nil when it refuses them, else each claim of
    /// `TokenClaims.claimNames` it kept, in that order. `parse` must accept exactly the same objects with the same
    /// values.
    @_spi(Fuzzing)
    public static func scannedClaims(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth,
                                     maxBytes: Int = defaultMaxBytes) -> [JSONValue?]? {
        var slots = MemberSlots()
        do {
            try scanObject(bytes, maxDepth: maxDepth, maxBytes: maxBytes, into: &slots, select: TokenClaims.claimSlot)
        } catch {
            return nil
        }
        return [slots.v0, slots.v1, slots.v2, slots.v3, slots.v4, slots.v5, slots.v6, slots.v7, slots.v8, slots.v9]
    }

    /// The payload claim names `scannedClaims` reports, in its order.
    @_spi(Fuzzing)
    public static var claimNames: [String] { TokenClaims.claimNames }
}
