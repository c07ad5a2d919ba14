import AppAttest
import AppAttestSimulator
import AppCheck
import Foundation
import Glibc
import Synchronization

/// A stand-in for Apple's App Attest data API (`POST /v1/attestationData`; Apple cannot be reached from the test
/// machine), for the receipt refresher (docs/issuer.md "Fraud risk"). It checks what Apple checks:
///
/// - the bearer token is a compact JWS, `alg` `ES256`, `kid` the expected Key ID, signed by the public half of the
///   test `.p8` key, claims `iss` the Team ID and an `iat` at most an hour old and at most 60 s ahead
///   (`FakeDeviceCheckServer.iatAccepted`) — else `401`;
/// - the body is the base64 of a receipt that verifies under `receiptCA` — else `400`.
///
/// Then the next scripted `Answer` (or `fallback` when none is queued) decides: a new RECEIPT for the same App ID and
/// attested certificate with a chosen risk metric, signed by `receiptCA`; 304; 404; 429; 500; or a 200 whose receipt
/// names another App ID.
public final class FakeAppAttestDataServer: @unchecked Sendable {
    public enum Answer: Sendable, Equatable {
        case receipt(riskMetric: Int, notBeforeIn: Int64 = 86_400)
        case notModified, notFound, tooManyRequests, serverError
        case foreignReceipt
    }

    public let keyId: String
    public let teamId: String
    private let publicKey: ES256PublicKey
    private let receiptCA: SimulatedReceiptCA
    private let verifier: AppAttestReceiptVerifier
    private var server: ThreadPerConnectionServer!
    private let state = Mutex<(calls: Int, queued: [Answer], fallback: Answer, paths: [String])>((0, [], .notFound, []))
    private let flight = Mutex<(now: Int, most: Int, delay: Double)>((0, 0, 0))

    /// `http://127.0.0.1:PORT`, for `app_attest.risk.api_url`.
    public var url: String { server.url }
    /// Requests received (every one, valid or not).
    public var calls: Int { state.withLock { $0.calls } }
    /// The most requests ever answered at once.
    public var mostInFlight: Int { flight.withLock { $0.most } }
    /// Seconds each answer is held back (to see concurrency).
    public func setDelay(_ seconds: Double) { flight.withLock { $0.delay = seconds } }

    public init(publicKey: ES256PublicKey, keyId: String, teamId: String, receiptCA: SimulatedReceiptCA) throws {
        self.publicKey = publicKey
        self.keyId = keyId
        self.teamId = teamId
        self.receiptCA = receiptCA
        verifier = try AppAttestReceiptVerifier(rootCertificatePEM: receiptCA.rootPEM)
        server = try ThreadPerConnectionServer(backlog: 64) { [unowned self] fd in self.serve(fd) }
    }

    public func stop() { server.stop() }

    /// Answers for the next calls, in order; then `fallback`.
    public func queue(_ answers: [Answer], fallback: Answer? = nil) {
        state.withLock {
            $0.queued += answers
            if let fallback { $0.fallback = fallback }
        }
    }

    private func serve(_ fd: Int32) {
        guard let (head, body) = FakeDeviceCheckServer.readRequest(fd) else { return }
        let delay = flight.withLock { f -> Double in f.now += 1; f.most = max(f.most, f.now); return f.delay }
        defer { flight.withLock { $0.now -= 1 } }
        if delay > 0 { usleep(useconds_t(delay * 1_000_000)) }
        let (status, text) = answer(head: head, body: body)
        let reason = [200: "OK", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
                      429: "Too Many Requests", 500: "Internal Server Error"][status] ?? "Status"
        let response = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/plain\r\n"
            + (status == 304 ? "" : "Content-Length: \(text.utf8.count)\r\n") + "Connection: close\r\n\r\n" + (status == 304 ? "" : text)
        _ = Array(response.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func answer(head: String, body: [UInt8]) -> (Int, String) {
        state.withLock { $0.calls += 1 }
        let lines = head.components(separatedBy: "\r\n")
        guard lines.first == "POST /v1/attestationData HTTP/1.1" else { return (404, "Not Found") }
        let authorization = lines.first { $0.lowercased().hasPrefix("authorization: bearer ") }.map { String($0.dropFirst(22)) }
        guard let bearer = authorization, bearerIsValid(bearer) else { return (401, "Unable to verify authorization token") }
        let now = Int64(Date().timeIntervalSince1970)
        guard let data = Data(base64Encoded: String(decoding: body, as: UTF8.self)),
              let old = try? verifier.verifySignature([UInt8](data), at: now) else { return (400, "Bad receipt") }
        let next: Answer = state.withLock { $0.queued.isEmpty ? $0.fallback : $0.queued.removeFirst() }
        switch next {
        case .notModified: return (304, "")
        case .notFound: return (404, "")
        case .tooManyRequests: return (429, "")
        case .serverError: return (500, "")
        case let .receipt(metric, notBeforeIn):
            return (200, receipt(from: old, metric: metric, appId: old.appId, notBefore: now + notBeforeIn, now: now))
        case .foreignReceipt:
            return (200, receipt(from: old, metric: 1, appId: "ZZZZZ99999.com.example.stranger", notBefore: now + 86_400, now: now))
        }
    }

    private func receipt(from old: AppAttestReceipt, metric: Int, appId: String, notBefore: Int64, now: Int64) -> String {
        var fields = SimulatedReceiptCA.Fields(appId: appId, attestedCertificate: old.attestedCertificate,
                                               clientHash: old.clientHash, now: now)
        fields.kind = "RECEIPT"
        fields.token = old.token
        fields.riskMetric = metric
        fields.notBefore = notBefore
        return ((try? receiptCA.receipt(fields)).map { Data($0).base64EncodedString() }) ?? ""
    }

    private func bearerIsValid(_ jwt: String) -> Bool {
        let bytes = Array(jwt.utf8)
        guard let jws = CompactJWS.decode(bytes, maxJSONBytes: 4096) else { return false }
        let header = jws.header, claims = jws.payload
        guard header.member("alg")?.stringValue == "ES256", header.member("kid")?.stringValue == keyId,
              claims.member("iss")?.stringValue == teamId,
              let iat = claims.member("iat")?.numberValue,
              FakeDeviceCheckServer.iatAccepted(iat, now: Date().timeIntervalSince1970) else { return false }
        return publicKey.verifyES256(signingInput: bytes[jws.signingInputRange], signature: jws.signature)
    }
}
