/// The fields of a KeyDescription `AuthorizationList` that the issuer's rules read; the others are checked
/// for well-formedness and skipped.
///
/// Every member is `[tag] EXPLICIT`; the tags must ascend strictly (X.690 §10.3, and Google's verifier refuses
/// unordered lists too). Unknown tags are skipped, as the schema grows with each KeyMint version.
public struct AuthorizationList: Sendable, Equatable {
    /// `origin` [702]: 0 GENERATED, 1 DERIVED, 2 IMPORTED, 3 UNKNOWN, 4 SECURELY_IMPORTED.
    public var origin: Int64?
    /// `rootOfTrust` [704].
    public var rootOfTrust: RootOfTrust?
    /// `osVersion` [705], e.g. 160000 for Android 16.
    public var osVersion: Int64?
    /// `osPatchLevel` [706], YYYYMM.
    public var osPatchLevel: Int64?
    /// `attestationApplicationId` [709], parsed.
    public var attestationApplicationID: AttestationApplicationID?
    /// `vendorPatchLevel` [718], YYYYMMDD.
    public var vendorPatchLevel: Int64?
    /// `bootPatchLevel` [719], YYYYMMDD.
    public var bootPatchLevel: Int64?

    /// The origin value for a key generated inside the secure hardware.
    public static let originGenerated: Int64 = 0

    /// An empty list.
    public init() {}

    /// Parses one `AuthorizationList ::= SEQUENCE { [n] EXPLICIT … }` at the reader's position.
    init(reading reader: inout DERReader, limits: DERLimits) throws(DERError) {
        self.init()
        let sequence = try reader.next(.sequence)
        var members = try reader.children(of: sequence)
        var previous: UInt32? = nil
        while !members.isAtEnd {
            let member = try members.next()
            guard member.tag.tagClass == .contextSpecific, member.tag.constructed else {
                throw DERError(.unexpectedTag, at: member.start)
            }
            if let previous, member.tag.number <= previous { throw DERError(.unorderedTags, at: member.start) }
            previous = member.tag.number
            var inner = try members.children(of: member)
            switch member.tag.number {
            case 702: origin = try inner.readInteger()
            case 704: rootOfTrust = try RootOfTrust(reading: &inner)
            case 705: osVersion = try inner.readInteger()
            case 706: osPatchLevel = try inner.readInteger()
            case 709:
                let start = inner.position
                let contents = try inner.readOctetString()
                do {
                    attestationApplicationID = try AttestationApplicationID(der: contents, limits: limits)
                } catch {
                    // Offsets inside the nested DER point into the OCTET STRING; report the member instead.
                    throw DERError(error.kind, at: start)
                }
            case 718: vendorPatchLevel = try inner.readInteger()
            case 719: bootPatchLevel = try inner.readInteger()
            default: _ = try inner.next() // well-formed, skipped
            }
            try inner.expectEnd()
        }
    }
}
