/// The attestation application id (tag [709]): which package(s) asked for the key, and the SHA-256 digests
/// of their signing certificates. Android fills it from the package manager, so it is as trustworthy as the
/// OS: rely on it only together with a locked, verified boot.
public struct AttestationApplicationID: Sendable, Equatable {
    /// One package sharing the calling UID.
    public struct Package: Sendable, Equatable {
        /// The package name (e.g. `com.example.app`), as the bytes the device wrote (UTF-8 in practice).
        public let name: [UInt8]
        /// The package's version code.
        public let version: Int64
    }

    /// The packages (usually one).
    public let packages: [Package]
    /// SHA-256 digests of the signing certificates.
    public let signatureDigests: [[UInt8]]

    /// Most packages or digests accepted: a UID shared by more packages than this is refused.
    public static let maxEntries = 32

    /// Parses the OCTET STRING's contents: `SEQUENCE { SET OF SEQUENCE { OCTET STRING, INTEGER }, SET OF
    /// OCTET STRING }`, nothing after. The SETs' DER order is not enforced (devices do not sort them).
    public init(der: [UInt8], limits: DERLimits = .keyDescription) throws(DERError) {
        var top = try DERReader(der, limits: limits)
        let sequence = try top.next(.sequence)
        try top.expectEnd()
        var fields = try top.children(of: sequence)
        var packageSet = try fields.children(of: try fields.next(.set))
        var packages: [Package] = []
        while !packageSet.isAtEnd {
            guard packages.count < Self.maxEntries else { throw DERError(.tooLarge, at: packageSet.position) }
            var info = try packageSet.children(of: try packageSet.next(.sequence))
            let name = try info.readOctetString()
            let version = try info.readInteger()
            try info.expectEnd()
            packages.append(Package(name: name, version: version))
        }
        var digestSet = try fields.children(of: try fields.next(.set))
        var digests: [[UInt8]] = []
        while !digestSet.isAtEnd {
            guard digests.count < Self.maxEntries else { throw DERError(.tooLarge, at: digestSet.position) }
            digests.append(try digestSet.readOctetString())
        }
        try fields.expectEnd()
        self.packages = packages
        self.signatureDigests = digests
    }
}
