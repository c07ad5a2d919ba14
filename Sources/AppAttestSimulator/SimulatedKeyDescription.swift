/// The KeyDescription a `SimulatedAndroidDevice` writes into its leaf; the defaults describe a key generated in
/// the TEE of a locked, verified phone for the device's package. Each field can be changed so a test breaks one
/// rule of SPEC §10 at a time. Simulator only.
public struct SimulatedKeyDescription: Sendable {
    /// `attestationVersion` (default 400, KeyMint 4).
    public var attestationVersion: Int64 = 400
    /// `attestationSecurityLevel`: 0 Software, 1 TrustedEnvironment (default), 2 StrongBox.
    public var attestationSecurityLevel: Int64 = 1
    /// `keyMintSecurityLevel`, same values (default 1).
    public var keyMintSecurityLevel: Int64 = 1
    /// The challenge written; `nil` (default) writes the one passed to `generateKey`.
    public var challenge: [UInt8]? = nil
    /// The package name in the attestation application id; `nil` uses the device's.
    public var packageName: String? = nil
    /// Signing certificate digests; `nil` uses the device's.
    public var signatureDigests: [[UInt8]]? = nil
    /// `origin` (0 GENERATED, 2 IMPORTED).
    public var origin: Int64 = 0
    /// `rootOfTrust.deviceLocked`.
    public var deviceLocked = true
    /// `rootOfTrust.verifiedBootState`: 0 Verified (default), 1 SelfSigned, 2 Unverified, 3 Failed.
    public var verifiedBootState: Int64 = 0
    /// `osPatchLevel`, YYYYMM (default 202611); `nil` leaves it out.
    public var osPatchLevel: Int64? = 202_611
    /// The whole extension value instead of the encoding of the fields above (for malformed input).
    public var rawValue: [UInt8]? = nil

    /// Default (valid) fields.
    public init() {}

    /// The DER value of the extension.
    func der(challenge given: [UInt8], packageName defaultPackage: String, signatureDigests defaultDigests: [[UInt8]]) -> [UInt8] {
        if let rawValue { return rawValue }
        let application = DERWriter.sequence([
            DERWriter.set([DERWriter.sequence([DERWriter.octetString(Array((packageName ?? defaultPackage).utf8)), DERWriter.integer(1)])]),
            DERWriter.set((signatureDigests ?? defaultDigests).map(DERWriter.octetString)),
        ])
        let software = DERWriter.sequence([
            DERWriter.explicit(701, DERWriter.integer(1_764_300_000_000)), // creationDateTime
            DERWriter.explicit(709, DERWriter.octetString(application)),
        ])
        var hardware: [[UInt8]] = [
            DERWriter.explicit(1, DERWriter.set([DERWriter.integer(2), DERWriter.integer(3)])), // purpose: sign, verify
            DERWriter.explicit(2, DERWriter.integer(3)),   // algorithm: EC
            DERWriter.explicit(3, DERWriter.integer(256)), // keySize
            DERWriter.explicit(10, DERWriter.integer(1)),  // ecCurve: P-256
            DERWriter.explicit(503, DERWriter.null()),     // noAuthRequired
            DERWriter.explicit(702, DERWriter.integer(origin)),
            DERWriter.explicit(704, DERWriter.sequence([
                DERWriter.octetString([UInt8](repeating: 0x5A, count: 32)), DERWriter.boolean(deviceLocked),
                DERWriter.enumerated(verifiedBootState), DERWriter.octetString([UInt8](repeating: 0xA5, count: 32)),
            ])),
            DERWriter.explicit(705, DERWriter.integer(160_000)),
        ]
        if let osPatchLevel { hardware.append(DERWriter.explicit(706, DERWriter.integer(osPatchLevel))) }
        return DERWriter.sequence([
            DERWriter.integer(attestationVersion), DERWriter.enumerated(attestationSecurityLevel),
            DERWriter.integer(attestationVersion), DERWriter.enumerated(keyMintSecurityLevel),
            DERWriter.octetString(challenge ?? given), DERWriter.octetString([]),
            software, DERWriter.sequence(hardware),
        ])
    }
}

extension SimulatedKeyDescription {
    /// The extension value these fields give for `challenge` and a device of package `com.example.app` signed by
    /// `digest` (to place a KeyDescription where a device never would, e.g. in an intermediate).
    public func derForTests(challenge: [UInt8], digest: [UInt8]) -> [UInt8] {
        der(challenge: challenge, packageName: "com.example.app", signatureDigests: [digest])
    }
}
