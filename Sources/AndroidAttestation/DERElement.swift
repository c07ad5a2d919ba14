/// One element read by `DERReader`: its tag, where it starts and where its contents lie in the reader's input.
public struct DERElement: Sendable, Equatable {
    /// The element's tag.
    public let tag: DERTag
    /// Offset of the first identifier octet.
    public let start: Int
    /// Offsets of the contents (after the length octets).
    public let contents: Range<Int>
}
