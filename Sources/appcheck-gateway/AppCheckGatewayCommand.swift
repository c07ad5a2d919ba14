import AppCheck
import ArgumentParser
import Foundation
import Gateway

@main
struct AppCheckGatewayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appcheck-gateway",
        abstract: "A reverse proxy that verifies Firebase App Check tokens before forwarding requests.",
        subcommands: [Serve.self, CheckConfig.self, Demo.self, Keygen.self, Mint.self, Verify.self, Healthcheck.self,
                      ATSCheck.self],
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
        let adminFile = AdminAddressFile.fromEnvironment()
        if let adminFile, let address = server.adminAddress { adminFile.write(address.description, log: server.logSink) }
        server.runUntilTerminated(configPath: options.path, environment: ProcessInfo.processInfo.environment)
        adminFile?.remove()
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
        abstract: "GET /readyz on the running server's admin address; exit 0 when ready (for container health checks).",
        discussion: """
        Without --config, probes the address the running `serve` wrote to $APPCHECK_GATEWAY_ADMIN_FILE (the \
        container image sets it), so the check follows whatever --config the server was started with. With \
        --config, or when that file is absent, reads admin_listen from the configuration.
        """)
    @OptionGroup var options: ConfigOption
    @Option(help: "Seconds to wait for an answer.") var timeout: Double = 2

    func run() throws {
        let host: String
        let port: UInt16
        if options.config == nil, let written = AdminAddressFile.fromEnvironment()?.read() {
            (host, port) = written
        } else {
            let settings = try options.load()
            guard let admin = settings.server.adminListen else {
                printError("appcheck-gateway: healthcheck: no admin_listen configured")
                throw ExitCode(1)
            }
            (host, port) = (admin.host, admin.port)
        }
        // A wildcard bind answers on loopback.
        let probeHost = host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host
        switch AdminProbe.get(host: probeHost, port: port, path: "/readyz", timeout: timeout) {
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
        abstract: "The whole thing on one machine with no Firebase project: a local token issuer, a sample upstream and the gateway on 127.0.0.1, with curl commands to paste.")
    @Option(help: "The demo configuration.") var config: String = "Config/demo.yaml"
    @Option(help: "Port of the sample upstream (0 = any free port).") var upstreamPort: UInt16 = 0
    @Option(help: "Port of the local key-set server (0 = any free port).") var jwksPort: UInt16 = 0

    static let projectNumber = "123456789012"
    static let projectId = "demo-project"
    static let appId = "1:123456789012:ios:0123456789abcdef"

    func run() throws {
        GatewayServer.blockSignals()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("appcheck-gateway-demo-\(getpid())")
        let upstream: SampleUpstream
        let issuer: KeySetServer
        let key: RSAPrivateKey
        let kid: String
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            key = try RSAPrivateKey.generate(bits: 2048)
            kid = SigningKeys.defaultKid(for: key)
            try SigningKeys.write(key: key, kid: kid, keyPath: dir.appendingPathComponent("key.pem").path,
                                  jwksPath: dir.appendingPathComponent("jwks.json").path)
            let jwks = try String(contentsOf: dir.appendingPathComponent("jwks.json"), encoding: .utf8)
            issuer = try KeySetServer(document: jwks, port: jwksPort)
            upstream = try SampleUpstream(port: upstreamPort)
        } catch {
            printError("appcheck-gateway: demo: \(error)")
            throw ExitCode(1)
        }
        var env = ProcessInfo.processInfo.environment
        env["DEMO_UPSTREAM_PORT"] = String(upstream.address.port)
        env["DEMO_JWKS_URL"] = issuer.url
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
        let deadline = Date().addingTimeInterval(10)
        while !server.readinessProblems().isEmpty && Date() < deadline { usleep(20_000) }
        let gw = server.listenAddresses.first?.description ?? "127.0.0.1:8080"
        let admin = server.adminAddress?.description ?? "-"
        let now = Int(Date().timeIntervalSince1970)
        func mint(ttl: Int, jti: String?) -> String {
            (try? TokenMinter.mint(key: key, kid: kid, projectNumber: Self.projectNumber, projectId: Self.projectId,
                                   appId: Self.appId, issuedAt: now, ttl: ttl, jti: jti)) ?? "?"
        }
        let session = mint(ttl: 3600, jti: nil)
        let limited = mint(ttl: 300, jti: SigningKeys.randomJTI())
        let keyPath = dir.appendingPathComponent("key.pem").path
        print("""
        AppCheck Gateway demo is running (Ctrl-C to stop). Ready: \(server.readinessProblems().isEmpty ? "yes" : "no")
          gateway   http://\(gw)
          upstream  http://\(upstream.address)   (built-in sample: echoes what it receives as JSON)
          key set   \(issuer.url)   (a local issuer standing in for Firebase; key in \(keyPath))
          admin     http://\(admin)

        1. A valid App Check token on an enforced route: 200, and the upstream sees X-AppCheck-Status: verified
        curl -i -H 'X-Firebase-AppCheck: \(session)' http://\(gw)/api/orders

        2. No token on the enforced route: 401 app_check_token_missing
        curl -i http://\(gw)/api/orders

        3. A monitored route forwards anyway and tells the upstream why (X-AppCheck-Reason: missing)
        curl -i http://\(gw)/public/hello

        4. A limited-use token on the replay-protected route: 200 the first time, 401 app_check_token_reused after
        curl -i -X POST -H 'X-Firebase-AppCheck: \(limited)' http://\(gw)/api/redeem
        curl -i -X POST -H 'X-Firebase-AppCheck: \(limited)' http://\(gw)/api/redeem

        5. Firebase's request categories, per route, as Prometheus metrics
        curl -s http://\(admin)/metrics | grep appcheck_requests_total

        More tokens (valid for an hour; --limited-use for single-use ones):
        \(CommandLine.arguments.first ?? "appcheck-gateway") mint --key \(keyPath) --project-number \(Self.projectNumber) --project-id \(Self.projectId) --app-id \(Self.appId)

        """)
        fflush(nil)
        server.runUntilTerminated(configPath: config, environment: env)
        upstream.stop()
        issuer.stop()
        try? FileManager.default.removeItem(at: dir)
    }
}
