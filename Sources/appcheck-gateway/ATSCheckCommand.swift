import ArgumentParser
import Foundation
import GatewayTools

/// `appcheck-gateway ats-check HOST:PORT`: audits a live TLS endpoint against App Transport Security (docs/behaviour.md, TLS).
struct ATSCheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ats-check",
        abstract: "Audit a TLS endpoint against Apple App Transport Security; one PASS/FAIL line per requirement, exit 1 on any FAIL.")

    @Argument(help: "The endpoint, HOST:PORT ([IPv6]:PORT; port 443 when omitted).")
    var target: String

    @Option(name: .customLong("ca-file"), help: "PEM file of trusted CAs (a private CA); default: the system store.")
    var caFile: String?

    @Option(help: "Name for SNI and the certificate host-name check; default: HOST.")
    var servername: String?

    @Option(help: "Seconds per connection attempt and per read or write.")
    var timeout: Double = 5

    func validate() throws {
        guard ATSCheckOptions.parseTarget(target) != nil else { throw ValidationError("expected HOST:PORT, got \"\(target)\"") }
        guard timeout > 0 else { throw ValidationError("--timeout must be positive") }
    }

    func run() throws {
        guard let (host, port) = ATSCheckOptions.parseTarget(target) else { throw ExitCode(1) }
        let options = ATSCheckOptions(host: host, port: port, serverName: servername, caFile: caFile, timeout: timeout)
        let lines: [ATSCheckLine]
        do { lines = try ATSChecker.run(options) } catch {
            printError("appcheck-gateway: ats-check: \(error)")
            throw ExitCode(1)
        }
        for line in lines { print(line) }
        if lines.contains(where: { !$0.passed }) { throw ExitCode(1) }
    }
}
