import EventLoop
import Foundation
import Glibc

/// A real `redis-server` on a free loopback port, owned by one test; stop and start it again on the same port
/// to simulate an outage. A missing `redis-server` is an error (tests fail, never skip).
///
/// With `persistent: true` it appends every write to an AOF file fsynced on each command in its own temporary
/// directory, so what was written survives a `SIGKILL` and a restart (like a production Redis with AOF).
///
/// `extraArguments` go to every start (`--requirepass`, `--user`, cluster options); `cliArguments` to every
/// `cli` call (`--user`/`--pass`). With `tls`, the server listens with TLS only (`--port 0 --tls-port`) and
/// `cli` speaks TLS trusting `tls.ca`.
public final class RedisServerProcess: @unchecked Sendable {
    /// Certificate, key and CA files for `redis-server --tls-*`.
    public struct TLSFiles: Sendable {
        public var cert: String, key: String, ca: String
        public init(cert: String, key: String, ca: String) { self.cert = cert; self.key = key; self.ca = ca }
    }

    public let port: UInt16
    public let directory: String
    public let persistent: Bool
    public let extraArguments: [String]
    public let cliArguments: [String]
    public let tls: TLSFiles?
    private var process: Process?

    public static let serverPath = "/usr/bin/redis-server"
    public static let cliPath = "/usr/bin/redis-cli"

    public init(persistent: Bool = false, port fixedPort: UInt16? = nil, extraArguments: [String] = [],
                cliArguments: [String] = [], tls: TLSFiles? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.serverPath),
              FileManager.default.isExecutableFile(atPath: Self.cliPath) else {
            throw HarnessError("\(Self.serverPath) and \(Self.cliPath) are required for the Redis tests")
        }
        if let fixedPort {
            port = fixedPort
        } else {
            let fd = try Socket.listen(SocketAddress(ip: "127.0.0.1", port: 0)!, reusePort: false)
            port = Socket.localAddress(fd)?.port ?? 0
            Socket.close(fd)
        }
        self.extraArguments = extraArguments
        self.cliArguments = cliArguments
        self.tls = tls
        directory = NSTemporaryDirectory() + "redis-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.persistent = persistent
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// `redis://127.0.0.1:<port>/0`, or `rediss://…?ca_file=<ca>` with TLS.
    public var url: String {
        if let tls { return "rediss://127.0.0.1:\(port)/0?ca_file=\(tls.ca)" }
        return "redis://127.0.0.1:\(port)/0"
    }
    public var isRunning: Bool { process?.isRunning ?? false }

    /// Starts the server (again) on `port` and waits at most `timeout` seconds for `PING` to answer.
    public func start(timeout: Double = 10) throws {
        precondition(process == nil, "already running")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.serverPath)
        var args = ["--bind", "127.0.0.1", "--save", "", "--dir", directory]
        if let tls {
            args += ["--port", "0", "--tls-port", String(port), "--tls-cert-file", tls.cert, "--tls-key-file", tls.key,
                     "--tls-ca-cert-file", tls.ca, "--tls-auth-clients", "no"]
        } else {
            args += ["--port", String(port)]
        }
        args += persistent ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"]
        args += extraArguments
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.runHoldingEnvironment()
        process = p
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if (try? cli(["PING"], timeout: 2)) == "PONG" { return }
            if !p.isRunning { break }
            usleep(20_000)
        }
        stop()
        throw HarnessError("redis-server on port \(port) did not answer PING within \(timeout)s")
    }

    /// SIGKILL (the test process blocks SIGTERM, and children inherit that mask) and reaps the process.
    public func stop() {
        guard let p = process else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    /// Sends `sig` to the server (SIGSTOP/SIGCONT simulate a hung server).
    public func signal(_ sig: Int32) {
        if let p = process { kill(p.processIdentifier, sig) }
    }

    /// Runs `redis-cli` against this server; its trimmed output. 15 s at most: with the whole suite running on two
    /// cores, a cluster node in the middle of a slot migration has been seen to take over 5 s to answer.
    public func cli(_ args: [String], timeout: Double = 15) throws -> String {
        var base = ["-h", "127.0.0.1", "-p", String(port)]
        if let tls { base += ["--tls", "--cacert", tls.ca] }
        let r = try BoundedCommand.run(Self.cliPath, base + cliArguments + ["--no-auth-warning"] + args, timeout: timeout)
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
