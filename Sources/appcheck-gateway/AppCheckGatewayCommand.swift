import ArgumentParser
import Foundation
import Gateway

@main
struct AppCheckGatewayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appcheck-gateway",
        abstract: "A reverse proxy that verifies Firebase App Check tokens before forwarding requests.",
        subcommands: [Serve.self, CheckConfig.self, Demo.self, Keygen.self, Mint.self, Healthcheck.self, ATSCheck.self],
        defaultSubcommand: Serve.self
    )
}

/// `--config`, defaulting to `$APPCHECK_GATEWAY_CONFIG`, then `Config/gateway.yaml`.
struct ConfigOption: ParsableArguments {
    @Option(name: .long, help: "The YAML configuration file (default: $APPCHECK_GATEWAY_CONFIG, then Config/gateway.yaml).")
    var config: String?

    var path: String {
        config ?? ProcessInfo.processInfo.environment["APPCHECK_GATEWAY_CONFIG"] ?? "Config/gateway.yaml"
    }

    /// Loads the file or exits 1 after printing every error as `FILE:LINE:COLUMN: message`.
    func load() throws -> Settings {
        switch ConfigLoader.load(path: path) {
        case .success(let settings): return settings
        case .failure(let errors):
            for e in errors.errors { printError(e.description) }
            throw ExitCode(1)
        }
    }
}

func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gateway.")
    @OptionGroup var options: ConfigOption

    func run() throws {
        GatewayServer.blockSignals()
        let settings = try options.load()
        let server = GatewayServer(settings: settings)
        do { try server.start() } catch {
            printError("appcheck-gateway: cannot start: \(error)")
            throw ExitCode(1)
        }
        server.runUntilTerminated(configPath: options.path, environment: ProcessInfo.processInfo.environment)
    }
}

struct CheckConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate the configuration and print the resolved routes; exit 1 listing every error.")
    @OptionGroup var options: ConfigOption

    func run() throws {
        let settings = try options.load()
        print(describeRoutes(settings))
    }
}

struct Healthcheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "GET /readyz on the configured admin address; exit 0 when ready (for container health checks).")
    @OptionGroup var options: ConfigOption
    @Option(help: "Seconds to wait for an answer.") var timeout: Double = 2

    func run() throws {
        let settings = try options.load()
        guard let admin = settings.server.adminListen else {
            printError("appcheck-gateway: healthcheck: no admin_listen configured")
            throw ExitCode(1)
        }
        let host = admin.host == "0.0.0.0" ? "127.0.0.1" : admin.host == "::" ? "::1" : admin.host
        switch AdminProbe.get(host: host, port: admin.port, path: "/readyz", timeout: timeout) {
        case .success(let (status, body)):
            print("\(status) \(body.trimmingCharacters(in: .whitespacesAndNewlines))")
            if status != 200 { throw ExitCode(1) }
        case .failure(let error):
            printError("appcheck-gateway: healthcheck: \(error)")
            throw ExitCode(1)
        }
    }
}

struct Demo: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the gateway on 127.0.0.1 in front of a built-in sample upstream and print curl commands.")
    @Option(help: "The demo configuration.") var config: String = "Config/demo.yaml"
    @Option(help: "Port of the sample upstream (0 = any free port).") var upstreamPort: UInt16 = 0

    func run() throws {
        GatewayServer.blockSignals()
        let upstream: SampleUpstream
        do { upstream = try SampleUpstream(port: upstreamPort) } catch {
            printError("appcheck-gateway: demo: cannot start the sample upstream: \(error)")
            throw ExitCode(1)
        }
        var env = ProcessInfo.processInfo.environment
        env["DEMO_UPSTREAM_PORT"] = String(upstream.address.port)
        let settings: Settings
        switch ConfigLoader.load(path: config, environment: env) {
        case .success(let s): settings = s
        case .failure(let errors):
            for e in errors.errors { printError(e.description) }
            throw ExitCode(1)
        }
        let server = GatewayServer(settings: settings, logSink: LogSink(fd: 2, level: .warning))
        do { try server.start() } catch {
            printError("appcheck-gateway: demo: cannot start the gateway: \(error)")
            throw ExitCode(1)
        }
        let gw = server.listenAddresses.first?.description ?? "127.0.0.1:8080"
        let admin = server.adminAddress?.description ?? "-"
        print("""
        AppCheck Gateway demo is running (Ctrl-C to stop).
          gateway   http://\(gw)
          upstream  http://\(upstream.address)   (built-in sample: echoes what it receives)
          admin     http://\(admin)

        Try:
          curl -i http://\(gw)/public/hello
          curl -i http://\(gw)/api/orders
          curl -i -X POST --data-binary 'hello' http://\(gw)/public/echo
          curl -i http://\(admin)/healthz

        """)
        server.runUntilTerminated(configPath: config, environment: env)
        upstream.stop()
    }
}
