/// An identifier octet (or octets) of a DER element: class, constructed bit and tag number (X.690 §8.1.2).
public struct DERTag: Sendable, Hashable, CustomStringConvertible {
    /// The tag's class (bits 8–7 of the first identifier octet).
    public enum TagClass: UInt8, Sendable, Hashable {
        case universal = 0, application = 1, contextSpecific = 2, privateUse = 3
    }

    /// The class.
    public let tagClass: TagClass
    /// Whether the contents are a sequence of elements (bit 6).
    public let constructed: Bool
    /// The tag number.
    public let number: UInt32

    /// Makes a tag.
    public init(_ tagClass: TagClass, constructed: Bool, number: UInt32) {
        self.tagClass = tagClass
        self.constructed = constructed
        self.number = number
    }

    /// Universal BOOLEAN (1).
    public static let boolean = DERTag(.universal, constructed: false, number: 1)
    /// Universal INTEGER (2).
    public static let integer = DERTag(.universal, constructed: false, number: 2)
    /// Universal OCTET STRING (4).
    public static let octetString = DERTag(.universal, constructed: false, number: 4)
    /// Universal NULL (5).
    public static let null = DERTag(.universal, constructed: false, number: 5)
    /// Universal ENUMERATED (10).
    public static let enumerated = DERTag(.universal, constructed: false, number: 10)
    /// Universal SEQUENCE (16, constructed).
    public static let sequence = DERTag(.universal, constructed: true, number: 16)
    /// Universal SET (17, constructed).
    public static let set = DERTag(.universal, constructed: true, number: 17)

    /// A context-specific constructed tag `[number]`, as EXPLICIT tagging writes it.
    public static func explicit(_ number: UInt32) -> DERTag { DERTag(.contextSpecific, constructed: true, number: number) }

    /// `"[class number]"` with `c` when constructed, e.g. `"[context 704 c]"`.
    public var description: String { "[\(tagClass) \(number)\(constructed ? " c" : "")]" }
}
