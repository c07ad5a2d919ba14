import Foundation
import Glibc

/// The built `appcheck-gateway` binary run as a child process (for signals, exit codes and CLI tests).
/// Its stdout (JSON log lines) is collected; `start` returns once the "listening" line names the ports.
public final class GatewayProcess: @unchecked Sendable {
    public let process = Process()
    private let pipe = Pipe()
    private let lock = NSLock()
    private var output = Data()
    public private(set) var port: UInt16 = 0
    public private(set) var adminPort: UInt16 = 0

    /// - Parameter launcher: a command that execs the binary, e.g. `["/usr/bin/prlimit", "--nofile=64"]`
    ///   (it must `exec`, so that `process.processIdentifier` is the gateway's). Default none.
    public init(arguments: [String], environment: [String: String]? = nil, launcher: [String] = []) throws {
        if let tool = launcher.first {
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = Array(launcher.dropFirst()) + [Run.gatewayBinary] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: Run.gatewayBinary)
            process.arguments = arguments
        }
        if let environment { process.environment = environment }
        process.standardOutput = pipe
        process.standardError = pipe
        // The handler is a dispatch source on the pipe's descriptor: it is cancelled at end of file and in `deinit`,
        // before the descriptor can be closed and reused by another test's socket (a source left on a reused
        // descriptor crashes libdispatch's event loop).
        pipe.fileHandleForReading.readabilityHandler = { [weak self] h in
            let d = h.availableData
            guard !d.isEmpty else {
                h.readabilityHandler = nil
                return
            }
            guard let self else { return }
            self.lock.lock(); self.output.append(d); self.lock.unlock()
        }
        try process.runHoldingEnvironment()
    }

    /// Starts `serve --config path` and waits (at most `timeout`) for its listening line.
    public static func serve(config: String, launcher: [String] = [], timeout: Double = 10) throws -> GatewayProcess {
        let p = try GatewayProcess(arguments: ["serve", "--config", config], launcher: launcher)
        let line = try p.waitForLine(containing: "\"message\":\"listening\"", timeout: timeout)
        guard let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let listen = (obj["listen"] as? [String])?.first, let port = UInt16(listen.split(separator: ":").last ?? "") else {
            throw HarnessError("unexpected listening line: \(line)")
        }
        p.port = port
        if let admin = obj["admin"] as? String, let ap = UInt16(admin.split(separator: ":").last ?? "") { p.adminPort = ap }
        return p
    }

    /// The complete lines printed so far (a line still being written, read in part from the pipe, is left out until
    /// its newline arrives or the process has exited: a test must never act on half a line).
    public var lines: [String] {
        let running = process.isRunning
        lock.lock(); defer { lock.unlock() }
        var all = String(decoding: output, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        if running { all.removeLast() }
        return all.filter { !$0.isEmpty }.map(String.init)
    }

    /// Waits for a line containing `text` that was printed after `skip` lines; returns it.
    @discardableResult
    public func waitForLine(containing text: String, after skip: Int = 0, timeout: Double = 10) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let l = lines.dropFirst(skip).first(where: { $0.contains(text) }) { return l }
            if !process.isRunning, lines.dropFirst(skip).first(where: { $0.contains(text) }) == nil {
                throw HarnessError("gateway exited (\(process.terminationStatus)) without printing \(text): \(lines.suffix(5))")
            }
            usleep(10_000)
        }
        throw HarnessError("timed out waiting for \(text); output: \(lines.suffix(5))")
    }

    public func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// User plus system CPU seconds the process has used so far (`/proc/PID/stat`), nil once it is gone.
    public var cpuSeconds: Double? {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // After "pid (comm)": field 3 is the state, so utime (14) and stime (15) are at offsets 11 and 12.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Open descriptors of the process (`/proc/PID/fd`), nil once it is gone.
    public var openDescriptors: Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/fd"))?.count
    }

    /// Waits for the process to end; its exit status, or nil on timeout (then it is killed).
    public func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        pipe.fileHandleForReading.readabilityHandler = nil
    }
}
