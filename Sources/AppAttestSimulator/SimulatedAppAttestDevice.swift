import AppAttest
import Synchronization

/// A simulated iPhone with one App Attest key: it attests the key under a `SimulatedAppAttestCA` and signs
/// assertions, producing the exact objects a real device sends. Every field can be overridden, so a test
/// can break one rule of docs/issuer.md at a time. Development and tests only; the key lives in memory.
public final class SimulatedAppAttestDevice: @unchecked Sendable {
    /// Overrides for one attestation; the defaults give a valid object.
    public struct AttestationOptions: Sendable {
        /// `fmt`.
        public var format = "apple-appattest"
        /// The App ID hashed into rpIdHash; `nil` uses the device's.
        public var appId: String? = nil
        /// The counter (must be 0 to pass).
        public var counter: UInt32 = 0
        /// The AAGUID; `nil` uses the device's environment.
        public var aaguid: [UInt8]? = nil
        /// The credential ID; `nil` uses the key ID.
        public var credentialId: [UInt8]? = nil
        /// The nonce the leaf certifies; `nil` certifies the right one.
        public var certifiedNonce: [UInt8]? = nil
        /// The whole nonce extension value (`nil`: the exact DER); `omitNonceExtension` leaves it out.
        public var nonceExtension: [UInt8]? = nil
        /// Leave the nonce extension out of the leaf.
        public var omitNonceExtension = false
        /// The `x5c` array; `nil` gives [leaf, intermediate].
        public var certificates: (@Sendable ([UInt8], [UInt8]) -> [[UInt8]])? = nil
        /// An extensions map appended to the authenticator data (iOS 27 style, ED flag clear).
        public var extensions: CBORMap? = nil
        /// Leaf validity, seconds relative to the attestation's `now`.
        public var leafValidity: ClosedRange<Int64> = -60...(3 * 86_400)
        /// `attStmt.receipt` as given (`nil`: signed by the device's receipt CA, or a placeholder without one).
        public var receipt: [UInt8]? = nil
        /// Leaves `attStmt.receipt` out altogether (Apple always sends one).
        public var omitReceipt = false
        /// Changes to the receipt's fields before the receipt CA signs them.
        public var receiptFields: (@Sendable (inout SimulatedReceiptCA.Fields) -> Void)? = nil
        /// Makes default (valid) options.
        public init() {}
    }

    /// Overrides for one assertion; the defaults give a valid object.
    public struct AssertionOptions: Sendable {
        /// The App ID hashed into rpIdHash; `nil` uses the device's.
        public var appId: String? = nil
        /// The counter; `nil` uses the device's next counter.
        public var counter: UInt32? = nil
        /// An extensions map appended to the authenticator data.
        public var extensions: CBORMap? = nil
        /// Makes default (valid) options.
        public init() {}
    }

    private let key: SimulatorKey
    private let ca: SimulatedAppAttestCA
    /// Signs the ATTEST receipt in each attestation; without one the receipt is a placeholder.
    public let receiptCA: SimulatedReceiptCA?
    /// The App ID the device's app has.
    public let appId: AppAttestAppID
    /// The environment the key is made in (decides the AAGUID).
    public let environment: AppAttestEnvironment
    /// The key's public half.
    public let publicKey: AppAttestPublicKey
    /// The key ID (SHA-256 of the uncompressed point), what the app sends as `key_id`.
    public var keyId: [UInt8] { publicKey.keyId }
    private let lastCounter = Synchronization.Mutex<UInt32>(0)

    /// A device with a fresh P-256 key, attested under `ca`.
    public init(ca: SimulatedAppAttestCA, appId: AppAttestAppID, environment: AppAttestEnvironment = .production,
                receiptCA: SimulatedReceiptCA? = nil) throws(SimulatorError) {
        self.ca = ca
        self.receiptCA = receiptCA
        self.appId = appId
        self.environment = environment
        key = try SimulatorKey(curve: "P-256")
        guard let publicKey = AppAttestPublicKey(spki: try key.spki()) else { throw SimulatorError("P-256 SubjectPublicKeyInfo") }
        self.publicKey = publicKey
    }

    /// An attestation object for `clientDataHash` (SHA-256 of the server's challenge for Firebase clients),
    /// with a leaf valid around `now` (seconds since the Unix epoch).
    public func attest(clientDataHash: [UInt8], now: Int64, options: AttestationOptions = AttestationOptions()) throws(SimulatorError) -> [UInt8] {
        let point = publicKey.uncompressedPoint
        let coseKey = CBORMap([(.int(1), .unsigned(2)), (.int(3), .negative(6)), (.int(-1), .unsigned(1)),
                               (.int(-2), .bytes(Array(point[1..<33]))), (.int(-3), .bytes(Array(point[33..<65])))])
        let credentialId = options.credentialId ?? keyId
        var authData = rpIdHash(options.appId) + [0x40] + bigEndian(options.counter)
        authData += options.aaguid ?? environment.aaguid
        authData += [UInt8(credentialId.count >> 8), UInt8(credentialId.count & 0xFF)] + credentialId
        authData += CBORWriter.encode(.map(coseKey))
        if let extensions = options.extensions { authData += CBORWriter.encode(.map(extensions)) }
        let nonce = options.certifiedNonce ?? sha256(authData + clientDataHash)
        let leaf = try ca.issueLeaf(spki: publicKey.spkiDER, nonce: nonce, notBefore: now + options.leafValidity.lowerBound,
                                    notAfter: now + options.leafValidity.upperBound, nonceExtension: options.nonceExtension,
                                    omitNonce: options.omitNonceExtension)
        let certificates = options.certificates?(leaf, ca.intermediateDER) ?? [leaf, ca.intermediateDER]
        var receipt = options.receipt ?? Array("simulated receipt".utf8)
        if options.receipt == nil, let receiptCA {
            var fields = SimulatedReceiptCA.Fields(appId: appId.string, attestedCertificate: leaf, clientHash: clientDataHash, now: now)
            fields.environment = environment == .production ? "production" : "sandbox"
            options.receiptFields?(&fields)
            receipt = try receiptCA.receipt(fields)
        }
        var pairs: [(CBORKey, CBORValue)] = [(.text("x5c"), .array(certificates.map { .bytes($0) }))]
        if !options.omitReceipt { pairs.append((.text("receipt"), .bytes(receipt))) }
        let statement = CBORMap(pairs)
        return CBORWriter.encode(.map(CBORMap([(.text("fmt"), .text(options.format)), (.text("attStmt"), .map(statement)),
                                               (.text("authData"), .bytes(authData))])))
    }

    /// An assertion object over `clientData` (artifact ‖ challenge for Firebase clients): the counter is one
    /// more than the last one this device used, unless `options.counter` says otherwise.
    public func assert(clientData: [UInt8], options: AssertionOptions = AssertionOptions()) throws(SimulatorError) -> [UInt8] {
        let counter = options.counter ?? lastCounter.withLock { value -> UInt32 in value += 1; return value }
        var authData = rpIdHash(options.appId) + [0x40] + bigEndian(counter)
        if let extensions = options.extensions { authData += CBORWriter.encode(.map(extensions)) }
        let nonce = sha256(authData + sha256(clientData))
        let signature = try key.signSHA256(nonce)
        return CBORWriter.encode(.map(CBORMap([(.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authData))])))
    }

    private func rpIdHash(_ override: String?) -> [UInt8] {
        override.map { sha256(Array($0.utf8)) } ?? appId.rpIdHash
    }

    private func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
