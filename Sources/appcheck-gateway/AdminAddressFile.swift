import JSONLog
import Foundation

/// The file through which `serve` tells `healthcheck` where its admin listener is bound: the path in
/// `$APPCHECK_GATEWAY_ADMIN_FILE` (the container image sets it; unset, nothing is written). A container health
/// check is a separate process that cannot see the `--config` the server was started with, so the server writes
/// the bound address (`host:port`, `[v6]:port`) after it starts and removes the file on a clean exit.
struct AdminAddressFile {
    let path: String

    /// `nil` when `$APPCHECK_GATEWAY_ADMIN_FILE` is unset or empty.
    static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> AdminAddressFile? {
        guard let path = environment["APPCHECK_GATEWAY_ADMIN_FILE"], !path.isEmpty else { return nil }
        return AdminAddressFile(path: path)
    }

    /// Writes atomically (a temporary file renamed over the old one), so a probe never reads half a line. A
    /// failure is logged, not fatal: the health check then falls back to the configuration.
    func write(_ address: String, log: LogSink) {
        do {
            try Data((address + "\n").utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            log.warning("cannot write the admin address file; healthcheck will read the configuration",
                        [("path", .string(path)), ("error", .string("\(error)"))])
        }
    }

    /// The address as written, or `nil` when the file is missing or not `host:port`.
    func read() -> (host: String, port: UInt16)? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let line = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let colon = line.lastIndex(of: ":"), let port = UInt16(line[line.index(after: colon)...]) else { return nil }
        var host = String(line[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}
