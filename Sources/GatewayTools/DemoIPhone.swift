import AppAttest
import AppAttestSimulator
import AppCheck
import Foundation
import Glibc

/// The demo's simulated iPhone (development only): a test App Attest CA made at start, whose root the demo's
/// `issuer.apps[].app_attest.root_ca_file` trusts, and one device that talks to the gateway's own issuer exactly as
/// Apple's AppCheckCore does — `generateAppAttestChallenge`, `exchangeAppAttestAttestation` (standard base64 of the
/// key ID, the attestation object and the challenge), then `exchangeAppAttestAssertion` over artifact ‖ challenge.
/// Never used by `serve`.
public final class DemoIPhone: @unchecked Sendable {
    public let ca: SimulatedAppAttestCA
    /// The test receipt CA signing the receipt in each attestation (Apple's would be Apple Root CA - G3); the
    /// demo's `receipt_root_ca_file` trusts it, and the demo's stand-in for Apple's data server signs with it too.
    public let receiptCA: SimulatedReceiptCA
    public let device: SimulatedAppAttestDevice
    private var artifact: [UInt8]?

    public init(teamId: String, bundleId: String, environment: AppAttestEnvironment = .development) throws {
        let now = Int64(Date().timeIntervalSince1970)
        ca = try SimulatedAppAttestCA(now: now)
        receiptCA = try SimulatedReceiptCA(now: now)
        device = try SimulatedAppAttestDevice(ca: ca, appId: AppAttestAppID(teamId: teamId, bundleId: bundleId),
                                              environment: environment, receiptCA: receiptCA)
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// Attests the device's key; returns the session token of the answer.
    public func attest(port: UInt16, methodBase: String) throws -> String {
        let challenge = try self.challenge(port: port, methodBase: methodBase)
        let object = try device.attest(clientDataHash: AppAttestVerifier.clientDataHash(challenge: challenge),
                                       now: Int64(Date().timeIntervalSince1970))
        let body = #"{"keyId":"\#(Data(device.keyId).base64EncodedString())","attestation":"\#(Data(object).base64EncodedString())","challenge":"\#(Data(challenge).base64EncodedString())"}"#
        let answer = try Self.post(port: port, path: methodBase + ":exchangeAppAttestAttestation", body: body)
        guard let artifactText = answer.member("artifact")?.stringValue ?? nil, let artifact = Data(base64Encoded: artifactText),
              let token = answer.member("appCheckToken")?.member("token")?.stringValue ?? nil else {
            throw Failure("exchangeAppAttestAttestation answered no artifact and token")
        }
        self.artifact = [UInt8](artifact)
        return token
    }

    /// An assertion with the attested key; returns the token (limited-use when asked).
    public func assert(port: UInt16, methodBase: String, limitedUse: Bool) throws -> String {
        guard let artifact else { throw Failure("assert before attest") }
        let challenge = try self.challenge(port: port, methodBase: methodBase)
        let assertion = try device.assert(clientData: artifact + challenge)
        let body = #"{"artifact":"\#(Data(artifact).base64EncodedString())","assertion":"\#(Data(assertion).base64EncodedString())","challenge":"\#(Data(challenge).base64EncodedString())","limitedUse":\#(limitedUse)}"#
        let answer = try Self.post(port: port, path: methodBase + ":exchangeAppAttestAssertion", body: body)
        guard let token = answer.member("token")?.stringValue ?? nil else { throw Failure("exchangeAppAttestAssertion answered no token") }
        return token
    }

    private func challenge(port: UInt16, methodBase: String) throws -> [UInt8] {
        let answer = try Self.post(port: port, path: methodBase + ":generateAppAttestChallenge", body: "")
        guard let text = answer.member("challenge")?.stringValue ?? nil, let bytes = Data(base64Encoded: text) else {
            throw Failure("generateAppAttestChallenge answered no challenge")
        }
        return [UInt8](bytes)
    }

    /// One `POST` over plain HTTP/1.1 to 127.0.0.1 (`Connection: close`), 10 s at most; the JSON answer of a 200.
    public static func post(port: UInt16, path: String, body: String) throws -> JSONValue {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure("cannot connect to 127.0.0.1:\(port)") }
        let request = Array("POST \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure("send failed") }
            sent += n
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while response.count < 1 << 20 {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            response += chunk[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw Failure("no HTTP response from 127.0.0.1:\(port)") }
        let statusLine = text[..<split.lowerBound].split(separator: "\r\n").first ?? ""
        let payload = String(text[split.upperBound...])
        guard statusLine.split(separator: " ").dropFirst().first == "200" else {
            throw Failure("\(path): \(statusLine) \(payload)")
        }
        do { return try StrictJSON.parse(Array(payload.utf8)) } catch { throw Failure("\(path): not JSON: \(payload)") }
    }
}
