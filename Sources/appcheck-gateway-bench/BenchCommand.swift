import ArgumentParser
import Foundation

/// The development executable of Benchmarks/: measurements that need a simulated device (`AppAttestSimulator`),
/// kept out of the `appcheck-gateway` binary (docs/architecture.md).
@main
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appcheck-gateway-bench",
        abstract: "Development benchmarks of appcheck-gateway (Benchmarks/).",
        subcommands: [BenchIssuer.self, BenchDPoP.self]
    )
}

func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}
