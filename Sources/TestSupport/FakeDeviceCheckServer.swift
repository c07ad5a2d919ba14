import AppCheck
import EventLoop
import Foundation
import Glibc
import Synchronization

/// A stand-in for Apple's DeviceCheck API (`POST /v1/validate_device_token`; Apple cannot be reached from the test
/// machine). It checks what Apple checks, so the tests prove the gateway speaks Apple's protocol:
///
/// - the bearer token is a compact JWS, `alg` `ES256`, `kid` the expected Key ID, signed by the public half of the
///   test `.p8` key, claims `iss` the Team ID and an `iat` at most an hour old and at most 60 s ahead (`iatAccepted`)
///   — else `401 Unable to verify authorization token` (Apple's answer to a wrong key);
/// - the body is JSON with a base64 `device_token`, a non-empty string `transaction_id` and a `timestamp` in
///   milliseconds within 60 s of now — else `400 Missing or incorrectly formatted device token payload`.
///
/// Then the device token's bytes choose the answer: `valid…` → 200 (empty body, as Apple), `bad…` → `400 Bad Device
/// Token`, `error…` → 500, `hang…` → no answer for `hangSeconds`.
public final class FakeDeviceCheckServer: @unchecked Sendable {
    public let keyId: String
    public let teamId: String
    private let publicKey: ES256PublicKey
    private let hangSeconds: Double
    private var server: ThreadPerConnectionServer!
    private let state = Mutex<(calls: Int, bearers: [String], bodies: [String])>((0, [], []))

    /// `http://127.0.0.1:PORT`, for `device_check.api_url`.
    public var url: String { server.url }
    public var port: UInt16 { server.port }
    /// Requests received.
    public var calls: Int { state.withLock { $0.calls } }
    /// Every bearer token received, in order.
    public var bearers: [String] { state.withLock { $0.bearers } }
    /// Every request body received, in order.
    public var bodies: [String] { state.withLock { $0.bodies } }

    public init(publicKey: ES256PublicKey, keyId: String, teamId: String, hangSeconds: Double = 8) throws {
        self.publicKey = publicKey
        self.keyId = keyId
        self.teamId = teamId
        self.hangSeconds = hangSeconds
        server = try ThreadPerConnectionServer(backlog: 64) { [unowned self] fd in self.serve(fd) }
    }

    public func stop() { server.stop() }

    private var stopped: Bool { server.isStopped }

    private func serve(_ fd: Int32) {
        guard let (head, body) = Self.readRequest(fd) else { return }
        state.withLock {
            $0.calls += 1
            $0.bodies.append(String(decoding: body, as: UTF8.self))
        }
        let (status, text, hang) = answer(head: head, body: body)
        if hang {
            let end = Date().addingTimeInterval(hangSeconds)
            while Date() < end && !stopped { usleep(20_000) }
            return
        }
        let reason = [200: "OK", 400: "Bad Request", 401: "Unauthorized", 500: "Internal Server Error"][status] ?? "Status"
        let response = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/plain\r\nContent-Length: \(text.utf8.count)\r\n"
            + "Connection: close\r\n\r\n\(text)"
        _ = Array(response.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func answer(head: String, body: [UInt8]) -> (Int, String, Bool) {
        let lines = head.components(separatedBy: "\r\n")
        guard lines.first == "POST /v1/validate_device_token HTTP/1.1" else { return (404, "Not Found", false) }
        let authorization = lines.first { $0.lowercased().hasPrefix("authorization: bearer ") }.map { String($0.dropFirst(22)) }
        guard let bearer = authorization, bearerIsValid(bearer) else { return (401, "Unable to verify authorization token", false) }
        state.withLock { $0.bearers.append(bearer) }
        let now = Date().timeIntervalSince1970
        guard let json = try? StrictJSON.parse(body),
              let tokenText = json.member("device_token")?.stringValue,
              let token = Data(base64Encoded: tokenText), !token.isEmpty,
              let transaction = json.member("transaction_id")?.stringValue, !transaction.isEmpty,
              let timestamp = json.member("timestamp")?.numberValue, abs(timestamp / 1000 - now) < 60 else {
            return (400, "Missing or incorrectly formatted device token payload", false)
        }
        let device = String(decoding: token, as: UTF8.self)
        if device.hasPrefix("valid") { return (200, "", false) }
        if device.hasPrefix("bad") { return (400, "Bad Device Token", false) }
        if device.hasPrefix("hang") { return (0, "", true) }
        return (500, "Internal Server Error", false)
    }

    /// Whether a bearer token's `iat` is one Apple takes: at most an hour old (Apple refuses older provider tokens;
    /// the gateway's clients reuse one for 20 minutes, `DeviceCheckClient.bearerLifetime`) and at most 60 s ahead.
    /// A tighter window here made a loaded test run's second refresh fail with 401 on a token the gateway rightly
    /// reused (RiskEndToEndTests kept the old metric for minutes).
    static func iatAccepted(_ iat: Double, now: Double) -> Bool { iat > now - 3600 && iat < now + 60 }

    private func bearerIsValid(_ jwt: String) -> Bool {
        let bytes = Array(jwt.utf8)
        guard let jws = CompactJWS.decode(bytes, maxJSONBytes: 4096) else { return false }
        let header = jws.header, claims = jws.payload
        guard header.member("alg")?.stringValue == "ES256", header.member("kid")?.stringValue == keyId,
              claims.member("iss")?.stringValue == teamId,
              let iat = claims.member("iat")?.numberValue,
              Self.iatAccepted(iat, now: Date().timeIntervalSince1970) else { return false }
        return publicKey.verifyES256(signingInput: bytes[jws.signingInputRange], signature: jws.signature)
    }

    /// One request: the head (without the blank line) and a `Content-Length` body; nil on a malformed request.
    static func readRequest(_ fd: Int32) -> (String, [UInt8])? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let deadline = Date().addingTimeInterval(10)
        var headEnd: Int?
        var length = 0
        while Date() < deadline {
            if headEnd == nil, let afterBlank = ThreadPerConnectionServer.headEnd(buffer) {
                let end = afterBlank - 4
                headEnd = end
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                for line in head.components(separatedBy: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.dropFirst(15).trimmingCharacters(in: .whitespaces)) ?? -1
                }
                guard length >= 0 else { return nil }
            }
            if let end = headEnd, buffer.count >= end + 4 + length {
                return (String(decoding: buffer[..<end], as: UTF8.self), Array(buffer[(end + 4)..<(end + 4 + length)]))
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) >= 0 else { return nil }
            if pfd.revents == 0 { continue }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return nil }
            buffer += chunk[0..<n]
        }
        return nil
    }
}
