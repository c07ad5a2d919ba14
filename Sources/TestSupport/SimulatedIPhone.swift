import AppAttest
import AppAttestSimulator
import Foundation

/// The thin test-side wrapper over `AppAttestSimulator` for end-to-end issuer tests: a fresh test App Attest
/// CA whose root is written to a file (for the config's `root_ca_file`), and one device that speaks what
/// Apple's AppCheckCore sends — standard base64 of the key ID, attestation and assertion, with
/// clientDataHash = SHA-256(challenge) and assertion clientData = artifact ‖ challenge (docs/issuer.md).
/// The CA, leaf and CBOR core live in the `AppAttestSimulator` library so a non-test target (the demo's
/// `simulate-device`) can reuse them.
public final class SimulatedIPhone: @unchecked Sendable {
    /// The test CA (trust its `rootPEM`, or `rootCAPath`).
    public let ca: SimulatedAppAttestCA
    /// The device with its App Attest key.
    public let device: SimulatedAppAttestDevice
    /// A PEM file holding the CA's root, removed by `cleanUp()`.
    public let rootCAPath: String
    /// The test receipt CA signing the ATTEST receipt in each attestation (Apple's would be Apple Root CA - G3).
    public let receiptCA: SimulatedReceiptCA
    /// A PEM file holding the receipt CA's root (for `receipt_root_ca_file`), removed by `cleanUp()`.
    public let receiptRootCAPath: String

    /// A CA made now and a device for `teamId.bundleId` in `environment`.
    public init(teamId: String = "ABCDE12345", bundleId: String = "com.example.app",
                environment: AppAttestEnvironment = .production) throws {
        let now = Int64(Date().timeIntervalSince1970)
        ca = try SimulatedAppAttestCA(now: now)
        receiptCA = try SimulatedReceiptCA(now: now)
        device = try SimulatedAppAttestDevice(ca: ca, appId: AppAttestAppID(teamId: teamId, bundleId: bundleId), environment: environment,
                                              receiptCA: receiptCA)
        rootCAPath = FileManager.default.temporaryDirectory.appendingPathComponent("appattest-root-\(UUID().uuidString).pem").path
        try ca.rootPEM.write(toFile: rootCAPath, atomically: true, encoding: .utf8)
        receiptRootCAPath = FileManager.default.temporaryDirectory.appendingPathComponent("receipt-root-\(UUID().uuidString).pem").path
        try receiptCA.rootPEM.write(toFile: receiptRootCAPath, atomically: true, encoding: .utf8)
    }

    /// `key_id` as the client sends it.
    public var keyIdBase64: String { Data(device.keyId).base64EncodedString() }

    /// `attestation` for the server's `challenge`, standard base64.
    public func attestationBase64(challenge: [UInt8],
                                  options: SimulatedAppAttestDevice.AttestationOptions = .init()) throws -> String {
        let hash = AppAttestVerifier.clientDataHash(challenge: challenge)
        let object = try device.attest(clientDataHash: hash, now: Int64(Date().timeIntervalSince1970), options: options)
        return Data(object).base64EncodedString()
    }

    /// `assertion` over artifact ‖ challenge, standard base64; the counter advances on each call.
    public func assertionBase64(artifact: [UInt8], challenge: [UInt8],
                                options: SimulatedAppAttestDevice.AssertionOptions = .init()) throws -> String {
        Data(try device.assert(clientData: artifact + challenge, options: options)).base64EncodedString()
    }

    /// Removes the root CA file.
    public func cleanUp() {
        try? FileManager.default.removeItem(atPath: rootCAPath)
        try? FileManager.default.removeItem(atPath: receiptRootCAPath)
    }
}
