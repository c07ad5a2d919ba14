import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// Issue 25: the request body's high-water mark holds. A 50 MB upload to an upstream that accepts the connection and
/// never reads must not end up in the gateway's memory: over HTTP/1.1 the client is stalled by TCP, over h2c it is
/// held at its flow-control window (no WINDOW_UPDATE while the body is held). Measured on a separate `serve` process:
/// the bytes it holds in I/O buffers (`gateway_buffer_bytes{kind="io"}`) and its RSS, from /proc.
@Suite struct BodyBackpressureTests {
    /// Accepts connections and never reads from them (until `stop`).
    final class Flag: Sendable { let raised = Atomic<Bool>(false) }

    static func deafUpstream() throws -> (server: ThreadPerConnectionServer, stop: Flag) {
        let stop = Flag()
        let server = try ThreadPerConnectionServer { _ in
            while !stop.raised.load(ordering: .relaxed) { usleep(50_000) }
        }
        return (server, stop)
    }

    @Test(arguments: ["--http1.1", "--http2-prior-knowledge"])
    func fiftyMegabytesToAnUpstreamThatNeverReadsStayOutOfMemory(protocolFlag: String) throws {
        let (upstream, deaf) = try Self.deafUpstream()
        defer { deaf.raised.store(true, ordering: .relaxed); upstream.stop() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gw-\(UUID().uuidString).yaml").path
        try GatewayHarness.config(upstream: upstream.url, routes: """
          - { name: all, prefix: /, upstream: api, enforcement: off, max_body_bytes: 100MiB }
        """, limits: ["body_timeout": "60s"])
            .replacingOccurrences(of: "response_timeout: 2s", with: "response_timeout: 60s")
            .write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let gw = try GatewayProcess.serve(config: path)
        defer { gw.signal(SIGKILL); _ = gw.waitForExit(timeout: 5) }
        let pid = gw.process.processIdentifier

        let body = FileManager.default.temporaryDirectory.appendingPathComponent("body-\(UUID().uuidString)")
        try Data(repeating: 0x61, count: 50_000_000).write(to: body)
        defer { try? FileManager.default.removeItem(at: body) }
        let before = MemoryReturnTests.rssBytes(pid)
        #expect(before > 0)

        // curl uploads for at most 8 s (on loopback 50 MB take a fraction of that when nothing holds them back);
        // meanwhile the gateway's buffers and RSS are sampled.
        let result = Mutex<ProcessResult?>(nil)
        let port = gw.port
        let uploader = Thread {
            let r = try? BoundedCommand.run("/usr/bin/curl", [
                "-sS", protocolFlag, "-m", "8", "-o", "/dev/null", "-w", "%{http_code} %{size_upload}",
                "-H", "Expect:", "--data-binary", "@\(body.path)", "http://127.0.0.1:\(port)/upload",
            ], timeout: 30)
            result.withLock { $0 = r }
        }
        uploader.start()
        var peakIO = 0, peakRSS = before
        let deadline = Date().addingTimeInterval(30)
        while result.withLock({ $0 }) == nil && Date() < deadline {
            peakIO = max(peakIO, MemoryReturnTests.gauge(gw.adminPort, "gateway_buffer_bytes{kind=\"io\"}"))
            peakRSS = max(peakRSS, MemoryReturnTests.rssBytes(pid))
            usleep(100_000)
        }
        let curl = try #require(result.withLock { $0 }, "curl did not end")
        // 28: curl's own time limit, the upload was held back; it never completed.
        #expect(curl.status == 28 && curl.stdout.hasPrefix("000 "), "curl \(curl.status): \(curl.stdout) \(curl.stderr)")
        #expect(upstream.connections == 1)
        #expect(peakIO >= 0 && peakIO < 8 << 20, "the gateway held \(peakIO) bytes in I/O buffers")
        #expect(peakRSS - before < 32 << 20, "RSS grew from \(before) to \(peakRSS)")
        print("body backpressure \(protocolFlag): io buffers peak \(peakIO) B, RSS \(before) -> \(peakRSS) B")
    }
}
