import AppAttestSimulator
import AppCheck
import Foundation

/// The demo's simulated Android phone (development only), beside `DemoIPhone`: a test attestation CA made at start,
/// whose root the demo's `issuer.apps[].android.root_ca_file` trusts, and one device that talks to the gateway's own
/// issuer as docs/examples/android's Kotlin provider does — `generateAndroidKeyChallenge`,
/// `exchangeAndroidKeyAttestation` (the Keystore chain, leaf first), then `exchangeAndroidKeyAssertion` (a signature
/// over a fresh challenge). Never used by `serve`.
public final class DemoAndroidPhone: @unchecked Sendable {
    public let ca: SimulatedAndroidCA
    public let device: SimulatedAndroidDevice
    private var key: SimulatedAndroidDevice.Key?
    private var artifact: [UInt8]?

    /// A phone running `packageName`, signed by a certificate whose SHA-256 is `signingCertificateDigest`.
    public init(packageName: String, signingCertificateDigest: [UInt8]) throws {
        ca = try SimulatedAndroidCA(now: Int64(Date().timeIntervalSince1970))
        device = SimulatedAndroidDevice(ca: ca, packageName: packageName, signingCertificateDigest: signingCertificateDigest)
    }

    /// Makes and attests the device's key; returns the session token of the answer.
    public func attest(port: UInt16, methodBase: String) throws -> String {
        let challenge = try self.challenge(port: port, methodBase: methodBase)
        let key = try device.generateKey(challenge: challenge, now: Int64(Date().timeIntervalSince1970))
        let chain = key.chain.map { "\"\(Data($0).base64EncodedString())\"" }.joined(separator: ",")
        let body = #"{"certificateChain":[\#(chain)],"challenge":"\#(Data(challenge).base64EncodedString())"}"#
        let answer = try DemoIPhone.post(port: port, path: methodBase + ":exchangeAndroidKeyAttestation", body: body)
        guard let artifactText = answer.member("artifact")?.stringValue ?? nil, let artifact = Data(base64Encoded: artifactText),
              let token = answer.member("appCheckToken")?.member("token")?.stringValue ?? nil else {
            throw DemoIPhone.Failure("exchangeAndroidKeyAttestation answered no artifact and token")
        }
        self.key = key
        self.artifact = [UInt8](artifact)
        return token
    }

    /// A signature over a fresh challenge with the attested key; returns the token (limited-use when asked).
    public func assert(port: UInt16, methodBase: String, limitedUse: Bool) throws -> String {
        guard let key, let artifact else { throw DemoIPhone.Failure("assert before attest") }
        let challenge = try self.challenge(port: port, methodBase: methodBase)
        let signature = try key.sign(challenge)
        let body = #"{"artifact":"\#(Data(artifact).base64EncodedString())","challenge":"\#(Data(challenge).base64EncodedString())","signature":"\#(Data(signature).base64EncodedString())","limitedUse":\#(limitedUse)}"#
        let answer = try DemoIPhone.post(port: port, path: methodBase + ":exchangeAndroidKeyAssertion", body: body)
        guard let token = answer.member("token")?.stringValue ?? nil else {
            throw DemoIPhone.Failure("exchangeAndroidKeyAssertion answered no token")
        }
        return token
    }

    private func challenge(port: UInt16, methodBase: String) throws -> [UInt8] {
        let answer = try DemoIPhone.post(port: port, path: methodBase + ":generateAndroidKeyChallenge", body: "{}")
        guard let text = answer.member("challenge")?.stringValue ?? nil, let bytes = Data(base64Encoded: text) else {
            throw DemoIPhone.Failure("generateAndroidKeyChallenge answered no challenge")
        }
        return [UInt8](bytes)
    }
}
