import EventLoop
import Foundation
import Gateway
import GatewayProcess
import GatewayConfig
import GatewayTools
import JSONLog

/// One call to get a real gateway (in-process, on 127.0.0.1 port 0) in front of a real sample upstream.
///
/// The YAML is a function of the upstream's URL so tests write configs the way users do.
public final class GatewayHarness: @unchecked Sendable {
    public let upstream: SampleUpstream
    public let server: GatewayServer
    public let configPath: String
    /// The folder of `configPath` and `logPath`, removed when the harness goes away (so a test run leaves nothing
    /// in the temporary folder; a test that needs its log reads it before then).
    private let directory: URL
    public let logPath: String
    private let logFD: Int32

    public var port: UInt16 { server.listenAddresses.first?.port ?? 0 }
    public var adminPort: UInt16 { server.adminAddress?.port ?? 0 }
    public var upstreamURL: String { "\(upstreamIsTLS ? "https" : "http")://127.0.0.1:\(upstream.address.port)" }
    private let upstreamIsTLS: Bool

    /// - Parameter yaml: the config, given the upstream URL (`http://127.0.0.1:PORT`).
    public init(environment: [String: String] = [:], upstreamTLS: TLSServerContext? = nil, _ yaml: (String) -> String) throws {
        upstream = try SampleUpstream(tls: upstreamTLS)
        upstreamIsTLS = upstreamTLS != nil
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gw-\(UUID().uuidString)")
        directory = dir
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        configPath = dir.appendingPathComponent("gateway.yaml").path
        logPath = dir.appendingPathComponent("gateway.log").path
        let text = yaml("\(upstreamTLS == nil ? "http" : "https")://127.0.0.1:\(upstream.address.port)")
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
        let settings: Settings
        switch ConfigLoader.load(path: configPath, environment: environment) {
        case .success(let s): settings = s
        case .failure(let errors):
            upstream.stop()
            try? FileManager.default.removeItem(at: dir)
            throw HarnessError("config: \(errors)")
        }
        logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        server = GatewayServer(settings: settings, logSink: LogSink(fd: logFD, level: settings.server.logLevel))
        do { try server.start() } catch {
            upstream.stop()
            close(logFD)
            try? FileManager.default.removeItem(at: dir)
            throw error
        }
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// The minimal config most tests start from: plain listener, one upstream, the given routes.
    /// `limits` entries override the short test defaults (`header_timeout: 2s`, `idle_timeout: 5s`,
    /// `shutdown_grace: 2s`); `server` lines go under `server:`, `appCheck` lines under `app_check:`.
    public static func config(upstream: String, routes: String, server extra: String = "", limits: [String: String] = [:],
                              appCheck: String = "", upstreamExtra: String = "", top: String = "") -> String {
        var l = ["header_timeout": "2s", "idle_timeout": "5s", "shutdown_grace": "2s"]
        for (k, v) in limits { l[k] = v }
        let limitLines = l.keys.sorted().map { "    \($0): \(l[$0]!)" }.joined(separator: "\n")
        return """
        server:
          listen: ["127.0.0.1:0"]
          admin_listen: "127.0.0.1:0"
          threads: 1
        \(extra)
          limits:
        \(limitLines)
        app_check:
          project_number: "123456789012"
        \(appCheck)
        upstreams:
          api:
            url: \(upstream)
            connect_timeout: 1s
            response_timeout: 2s
        \(upstreamExtra)
        routes:
        \(routes)
        \(top)
        """
    }

    /// Waits until `/readyz` answers 200 (the key set is loaded), at most `timeout` seconds.
    public func waitUntilReady(timeout: Double = 10) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var last = ""
        while Date() < deadline {
            if let r = try? RawHTTPClient.roundTrip(port: adminPort, "GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n") {
                if r.status == 200 { return }
                last = r.bodyText
            }
            usleep(20_000)
        }
        throw HarnessError("gateway not ready after \(timeout)s: \(last)")
    }

    /// The access/operational log written so far (complete lines only).
    public func logLines() -> [String] {
        LogFile.completeLines(logPath)
    }

    /// True once a log line contains `text`. Lines are written in batches, so they are waited for (up to
    /// `timeout` seconds).
    public func logged(_ text: String, timeout: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if logLines().contains(where: { $0.contains(text) }) { return true }
            usleep(20_000)
        } while Date() < deadline
        return false
    }

    public func stop() {
        server.shutdown(grace: 0.5)
        upstream.stop()
        close(logFD)
    }
}

public struct HarnessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}
