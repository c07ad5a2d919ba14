import AndroidAttestation
import Foundation
@testable import Issuer
import Glibc
import Synchronization
import TestSupport
import Testing

/// The attestation status list cache (SPEC §10): fetched from a fake of Google's endpoint over a real socket, kept for
/// its `Cache-Control: max-age`, retried a minute after a failure, and never used past 24 h (exchanges answer 503).
@Suite struct AndroidStatusListCacheTests {
    /// Answers `GET /attestation/status` with `Cache-Control: public, max-age=600` and the current body, or 500.
    final class FakeStatusServer: @unchecked Sendable {
        let body = Mutex(#"{"entries":{}}"#)
        let failing = Mutex(false)
        let requests = Atomic<Int>(0)
        var server: ThreadPerConnectionServer!

        init() throws {
            server = try ThreadPerConnectionServer { [self] fd in
                var buffer = [UInt8](repeating: 0, count: 4096), got: [UInt8] = []
                while ThreadPerConnectionServer.headEnd(got) == nil {
                    let n = read(fd, &buffer, buffer.count)
                    guard n > 0 else { return }
                    got += buffer[0..<n]
                }
                requests.add(1, ordering: .relaxed)
                let text = body.withLock { $0 }
                let answer = failing.withLock { $0 }
                    ? "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    : "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: public, max-age=600\r\n"
                        + "Content-Length: \(text.utf8.count)\r\nConnection: close\r\n\r\n\(text)"
                _ = Array(answer.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            }
        }

        var url: String { server.url + "/attestation/status" }
    }

    @Test func keptForItsMaxAgeRetriedAfterFailureAndNeverUsedPast24Hours() throws {
        let google = try FakeStatusServer()
        defer { google.server.stop() }
        let cache = AndroidStatusListCache(url: google.url, timeout: 5)
        let t0 = 1_800_000_000.0

        #expect(try cache.list(now: t0).get() == .empty)
        #expect(google.requests.load(ordering: .relaxed) == 1)
        google.body.withLock { $0 = #"{"entries":{"7E57CA01":{"status":"REVOKED","reason":"KEY_COMPROMISE"},"abc":{"status":"SUSPENDED"},"def":{"status":"OTHER"}}}"# }
        #expect(try cache.list(now: t0 + 599).get() == .empty, "max-age=600: not fetched again yet")
        #expect(google.requests.load(ordering: .relaxed) == 1)

        let refreshed = try cache.list(now: t0 + 600).get()
        #expect(google.requests.load(ordering: .relaxed) == 2)
        #expect(refreshed.status(ofSerial: "7e57ca01") == .revoked)
        #expect(refreshed.status(ofSerial: "0ABC") == .suspended)
        #expect(refreshed.status(ofSerial: "def") == nil, "only REVOKED and SUSPENDED refuse")

        // Google fails: the list fetched at t0 + 600 is still used, and the next try waits a minute.
        google.failing.withLock { $0 = true }
        #expect((try? cache.list(now: t0 + 1200).get()) == refreshed)
        #expect(google.requests.load(ordering: .relaxed) == 3)
        #expect((try? cache.list(now: t0 + 1259).get()) == refreshed)
        #expect(google.requests.load(ordering: .relaxed) == 3)
        // 24 h after the last good fetch the list is refused: fail closed.
        #expect((try? cache.list(now: t0 + 600 + 86_400).get()) == refreshed)
        switch cache.list(now: t0 + 600 + 86_401) {
        case .success: Issue.record("a list older than 24 h was used")
        case let .failure(stale): #expect(stale.reason.contains("old"), "\(stale.reason)")
        }
        // Google is back: the next exchange fetches and passes again.
        google.failing.withLock { $0 = false }
        #expect((try? cache.list(now: t0 + 600 + 86_500).get()) != nil)
    }

    @Test func noListAtAllIsUnavailable() {
        let cache = AndroidStatusListCache(url: "http://127.0.0.1:9/attestation/status", timeout: 2)
        switch cache.list(now: 1_800_000_000) {
        case .success: Issue.record("no list was fetched, yet one was used")
        case let .failure(stale): #expect(stale.reason.hasPrefix("no status list yet"), "\(stale.reason)")
        }
    }

    /// Google's own sample list (google/android-key-attestation's status.json, Tests/AndroidAttestationTests/Vectors),
    /// read through a `file://` URL as `revocation_url` allows.
    @Test func readsGooglesSampleListFromAFile() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("AndroidAttestationTests/Vectors/android-key-attestation_status.json").path
        let list = try AndroidStatusListCache(url: "file://" + path).list(now: 1_800_000_000).get()
        #expect(list.entries.count == 5)
        #expect(list.status(ofSerial: "cc66e9a93713b6e643b26c15879786f7") == .suspended)
        #expect(list.status(ofSerial: "11244410301401252959") == .revoked)
    }

    @Test func parsesGoogleShapeOnly() {
        #expect(AndroidStatusListCache.parse(Array(#"{"entries":{"1":{"status":"REVOKED"}}}"#.utf8))?.entries == ["1": .revoked])
        #expect(AndroidStatusListCache.parse(Array(#"{"entries":[]}"#.utf8)) == nil)
        #expect(AndroidStatusListCache.parse(Array(#"{"entries":{"1":"REVOKED"}}"#.utf8)) == nil)
        #expect(AndroidStatusListCache.parse(Array("not json".utf8)) == nil)
        #expect(AndroidStatusListCache.lifetime(["no-cache", "public, max-age=86400"]) == 86_400)
        #expect(AndroidStatusListCache.lifetime(["max-age=5"]) == 60)
        #expect(AndroidStatusListCache.lifetime(["max-age=9999999"]) == 86_400)
        #expect(AndroidStatusListCache.lifetime([]) == 3600)
    }
}
