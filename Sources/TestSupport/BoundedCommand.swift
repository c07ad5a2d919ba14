import Foundation
import Glibc

/// Runs a short helper program (`redis-cli`, `sqlite3`) to completion with a hard time limit. Unlike
/// `Run.command`, a program still running at the deadline gets `SIGKILL` (test processes block SIGTERM, and
/// children may inherit that mask), so a stuck helper can never hang a test.
public enum BoundedCommand {
    public static func run(_ path: String, _ arguments: [String], timeout: Double = 5) throws -> ProcessResult {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = arguments
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.runHoldingEnvironment()
        let outData = LockedBytes(), errData = LockedBytes()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async { outData.set(out.fileHandleForReading.readDataToEndOfFile()); group.leave() }
        group.enter()
        DispatchQueue.global().async { errData.set(err.fileHandleForReading.readDataToEndOfFile()); group.leave() }
        let deadline = Date().addingTimeInterval(timeout)
        while p.isRunning && Date() < deadline { usleep(2_000) }
        let timedOut = p.isRunning
        if timedOut { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        _ = group.wait(timeout: .now() + 5)
        if timedOut { throw HarnessError("\(path) \(arguments.joined(separator: " ")) killed after \(timeout)s") }
        return ProcessResult(status: p.terminationStatus, stdout: String(decoding: outData.get(), as: UTF8.self),
                             stderr: String(decoding: errData.get(), as: UTF8.self))
    }
}

private final class LockedBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    func get() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}
