import Foundation
import Glibc

/// A real Redis Cluster of `count` masters (no replicas) on loopback, owned by one test. Cluster mode needs a
/// fixed port and its bus port (port + 10000), so ports are picked by binding and releasing both. Every wait
/// is bounded; a missing `redis-server` is an error.
public final class RedisClusterProcess: @unchecked Sendable {
    public let nodes: [RedisServerProcess]
    public let tls: RedisServerProcess.TLSFiles?

    /// - Parameter tls: every node speaks TLS only, clients and cluster bus alike (`--tls-cluster yes`).
    public init(count: Int = 3, tls: RedisServerProcess.TLSFiles? = nil, timeout: Double = 30) throws {
        self.tls = tls
        var list: [RedisServerProcess] = []
        var used = Set<UInt16>()
        for _ in 0..<count {
            let port = try Self.freeClusterPort(excluding: used)
            used.insert(port)
            list.append(try RedisServerProcess(port: port, extraArguments: [
                "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
                "--cluster-require-full-coverage", "yes",
            ] + (tls == nil ? [] : ["--tls-cluster", "yes"]), tls: tls))
        }
        nodes = list
        let addresses = list.map { "127.0.0.1:\($0.port)" }
        let tlsArgs = tls.map { ["--tls", "--cacert", $0.ca] } ?? []
        let r = try BoundedCommand.run(RedisServerProcess.cliPath,
                                       tlsArgs + ["--cluster", "create"] + addresses + ["--cluster-replicas", "0", "--cluster-yes"],
                                       timeout: timeout)
        guard r.status == 0 else { throw HarnessError("redis-cli --cluster create: \(r.stdout.suffix(500)) \(r.stderr)") }
        guard waitUntilConsistent(timeout: timeout) else { throw HarnessError("cluster did not become consistent") }
    }

    deinit { stop() }

    /// `redis+cluster://` (`rediss+cluster://…?ca_file=` with TLS) naming the first two nodes as seeds.
    public var url: String {
        let hosts = nodes.prefix(2).map { "127.0.0.1:\($0.port)" }.joined(separator: ",")
        if let tls { return "rediss+cluster://\(hosts)?ca_file=\(tls.ca)" }
        return "redis+cluster://" + hosts
    }

    public func stop() { for n in nodes { n.stop() } }

    /// Every running node says `cluster_state:ok` and sees the same number of slot ranges.
    public func waitUntilConsistent(timeout: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let running = nodes.filter(\.isRunning)
            let ok = running.allSatisfy { (try? $0.cli(["CLUSTER", "INFO"]))?.contains("cluster_state:ok") == true }
            let views = Set(running.map { (try? $0.cli(["CLUSTER", "SLOTS"])) ?? "" })
            if ok && views.count == 1 && !(views.first ?? "").isEmpty { return true }
            usleep(50_000)
        }
        return false
    }

    /// The node serving `slot`, from the first node's view.
    public func owner(ofSlot slot: Int) throws -> RedisServerProcess {
        let id = try nodeID(forSlot: slot)
        for n in nodes where (try? n.cli(["CLUSTER", "MYID"])) == id { return n }
        throw HarnessError("no node owns slot \(slot)")
    }

    private func nodeID(forSlot slot: Int) throws -> String {
        let text = try nodes.first { $0.isRunning }?.cli(["CLUSTER", "NODES"]) ?? ""
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ")
            guard f.count >= 9 else { continue }
            for range in f[8...] {
                let bounds = range.split(separator: "-").compactMap { Int($0) }
                if bounds.count == 1, bounds[0] == slot { return String(f[0]) }
                if bounds.count == 2, bounds[0] <= slot, slot <= bounds[1] { return String(f[0]) }
            }
        }
        throw HarnessError("slot \(slot) not in CLUSTER NODES")
    }

    /// Moves `slot` from its owner to `target` the way `redis-cli --cluster reshard` does: IMPORTING on the
    /// target, MIGRATING on the source, `MIGRATE` of its keys in batches (`between` runs after each batch),
    /// then `SETSLOT NODE` everywhere.
    public func migrate(slot: Int, to target: RedisServerProcess, between: () -> Void = {}) throws {
        let source = try owner(ofSlot: slot)
        guard source.port != target.port else { return }
        let sourceID = try source.cli(["CLUSTER", "MYID"]), targetID = try target.cli(["CLUSTER", "MYID"])
        _ = try target.cli(["CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID])
        _ = try source.cli(["CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID])
        for _ in 0..<10_000 {
            let keys = try source.cli(["CLUSTER", "GETKEYSINSLOT", String(slot), "10"])
                .split(separator: "\n").map(String.init).filter { !$0.isEmpty }
            if keys.isEmpty { break }
            let r = try source.cli(["MIGRATE", "127.0.0.1", String(target.port), "", "0", "5000", "KEYS"] + keys)
            guard r == "OK" || r == "NOKEY" else { throw HarnessError("MIGRATE: \(r)") }
            between()
        }
        for n in [target, source] + nodes.filter({ $0.port != source.port && $0.port != target.port && $0.isRunning }) {
            _ = try n.cli(["CLUSTER", "SETSLOT", String(slot), "NODE", targetID])
        }
    }

    /// A free port whose cluster bus port (+10000) is free too.
    public static func freeClusterPort(excluding: Set<UInt16>) throws -> UInt16 {
        for _ in 0..<200 {
            let port = UInt16.random(in: 20000...29999)
            if excluding.contains(port) || excluding.contains(port + 10000) { continue }
            if canBind(port) && canBind(port + 10000) { return port }
        }
        throw HarnessError("no free port pair for a cluster node")
    }

    private static func canBind(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        return withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
