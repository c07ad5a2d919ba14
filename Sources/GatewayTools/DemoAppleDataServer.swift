import AppAttest
import AppAttestSimulator
import EventLoop
import Foundation
import Glibc
import Synchronization

/// **A demo stand-in for Apple's App Attest data server, never Apple.** `appcheck-gateway demo` runs it on
/// 127.0.0.1 so its simulated iPhone's receipt can be refreshed for a risk metric (docs/issuer.md "Fraud risk"):
/// Apple's `data.appattest.apple.com` accepts only receipts Apple signed and a real DeviceCheck key. It answers
/// `POST /v1/attestationData` whose body is the base64 of a receipt signed by the demo's receipt CA with a new
/// `RECEIPT` for the same App ID and key, carrying `riskMetric` (not-before a day later), signed by the same CA; any
/// other request gets 404, a request without `Authorization: Bearer` 401 and an unreadable receipt 400. It checks
/// no signature on the bearer token (the tests' fake server does). Never used by `serve`.
public final class DemoAppleDataServer: @unchecked Sendable {
    public let port: UInt16
    private let listenFD: Int32
    private let receiptCA: SimulatedReceiptCA
    private let verifier: AppAttestReceiptVerifier
    private let riskMetric: Int
    private let state = Mutex<(stopped: Bool, calls: Int)>((false, 0))

    public init(receiptCA: SimulatedReceiptCA, riskMetric: Int) throws {
        self.receiptCA = receiptCA
        self.riskMetric = riskMetric
        verifier = try AppAttestReceiptVerifier(rootCertificatePEM: receiptCA.rootPEM)
        guard let addr = SocketAddress(ip: "127.0.0.1", port: 0) else { throw SocketError("address 127.0.0.1", errno: 0) }
        listenFD = try Socket.listen(addr, backlog: 16, reusePort: false)
        port = Socket.localAddress(listenFD)?.port ?? 0
        Thread { [self] in acceptLoop() }.start()
    }

    deinit { Glibc.close(listenFD) }

    /// `http://127.0.0.1:PORT`, for `app_attest.risk.api_url`.
    public var url: String { "http://127.0.0.1:\(port)" }
    /// Receipts exchanged so far.
    public var calls: Int { state.withLock { $0.calls } }
    /// Stops accepting within 100 ms.
    public func stop() { state.withLock { $0.stopped = true } }

    private func acceptLoop() {
        while !state.withLock({ $0.stopped }) {
            var pfd = pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0, let (fd, _) = Socket.accept(listenFD) else { continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let (status, body) = answer(Self.readRequest(fd))
            let reason = [200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"][status] ?? "Status"
            let response = Array("HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
            _ = response.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            Glibc.close(fd)
        }
    }

    private func answer(_ request: (head: String, body: [UInt8])?) -> (Int, String) {
        guard let (head, body) = request else { return (400, "Bad request") }
        let lines = head.components(separatedBy: "\r\n")
        guard lines.first == "POST /v1/attestationData HTTP/1.1" else { return (404, "Not Found") }
        guard lines.contains(where: { $0.lowercased().hasPrefix("authorization: bearer ") }) else {
            return (401, "Missing authorization token")
        }
        let now = Int64(Date().timeIntervalSince1970)
        guard let data = Data(base64Encoded: String(decoding: body, as: UTF8.self)),
              let old = try? verifier.verifySignature([UInt8](data), at: now) else { return (400, "Bad receipt") }
        var fields = SimulatedReceiptCA.Fields(appId: old.appId, attestedCertificate: old.attestedCertificate,
                                               clientHash: old.clientHash, now: now)
        fields.kind = "RECEIPT"
        fields.token = old.token
        fields.riskMetric = riskMetric
        fields.notBefore = now + 86_400
        guard let receipt = try? receiptCA.receipt(fields) else { return (400, "Bad receipt") }
        state.withLock { $0.calls += 1 }
        return (200, Data(receipt).base64EncodedString())
    }

    /// A request head and its `Content-Length` body (at most 64 KiB), or nil.
    static func readRequest(_ fd: Int32) -> (head: String, body: [UInt8])? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while buffer.count < 64 * 1024 {
            if let blank = buffer.indices.dropLast(3).first(where: { buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10 }) {
                let head = String(decoding: buffer[..<blank], as: UTF8.self)
                let length = head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
                if buffer.count >= blank + 4 + length { return (head, Array(buffer[(blank + 4)..<(blank + 4 + length)])) }
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return nil }
            buffer += chunk[0..<n]
        }
        return nil
    }
}
