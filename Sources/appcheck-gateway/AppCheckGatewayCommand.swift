import AppCheck
import ArgumentParser
import Foundation
import Gateway
import GatewayProcess
import GatewayConfig
import GatewayTools
import Issuer
import JSONLog
import Synchronization

@main
struct AppCheckGatewayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "appcheck-gateway",
        abstract: "A reverse proxy that verifies Firebase App Check tokens before forwarding requests.",
        version: GatewayVersion.string,
        subcommands: [Serve.self, CheckConfig.self, Demo.self, Keygen.self, Mint.self, Verify.self, Healthcheck.self,
                      ATSCheck.self],
        defaultSubcommand: Serve.self
    )
}

/// `--config`, defaulting to `$APPCHECK_GATEWAY_CONFIG`, then `Config/gateway.yaml`.
struct ConfigOption: ParsableArguments {
    @Option(name: .long, help: "The YAML configuration file (default: $APPCHECK_GATEWAY_CONFIG, then Config/gateway.yaml).")
    var config: String?

    static let defaultPath = "Config/gateway.yaml"

    var path: String {
        config ?? ProcessInfo.processInfo.environment["APPCHECK_GATEWAY_CONFIG"] ?? Self.defaultPath
    }

    /// Loads the file or exits 1 after printing every error as `FILE:LINE:COLUMN: message`. When the file was
    /// not named at all and the default does not exist, one more line says how to make one.
    func load() throws -> Settings {
        switch ConfigLoader.load(path: path) {
        case .success(let settings): return settings
        case .failure(let errors):
            for e in errors.errors { printError(e.description) }
            if config == nil, ProcessInfo.processInfo.environment["APPCHECK_GATEWAY_CONFIG"] == nil,
               !FileManager.default.fileExists(atPath: path) {
                printError("appcheck-gateway: no --config and no $APPCHECK_GATEWAY_CONFIG, so \(Self.defaultPath) (relative to the working directory) was read; start one with `cp Config/gateway.example.yaml Config/gateway.yaml`, or try `appcheck-gateway demo`")
            }
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
        var settings = try options.load()
        DescriptorBudget.raisingSoftLimit(threads: settings.server.threads)
            .clamp(&settings, log: LogSink(fd: 1, level: settings.server.logLevel))
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
    @Option(help: "A configuration to run instead of the built-in one (the same as Config/demo.yaml).") var config: String?
    @Option(help: "Port of the sample upstream (0 = any free port).") var upstreamPort: UInt16 = 0
    @Option(help: "Port of the local key-set server (0 = any free port).") var jwksPort: UInt16 = 0

    static let projectNumber = "123456789012"
    static let projectId = "demo-project"
    static let appId = "1:123456789012:ios:0123456789abcdef"
    static let teamId = "DEMOTEAM01"
    static let bundleId = "com.example.demo"
    /// The simulated Android phone's app (Config/demo.yaml's android app): its App ID and signing certificate digest.
    static let androidAppId = "1:123456789012:android:0123456789abcdef"
    static let androidSigningDigest = [UInt8](repeating: 0xD1, count: 32)

    func run() throws {
        GatewayServer.blockSignals()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("appcheck-gateway-demo-\(getpid())")
        let upstream: SampleUpstream
        let issuer: KeySetServer
        let key: RSAPrivateKey
        let kid: String
        let phone: DemoIPhone
        let android: DemoAndroidPhone
        let apple: DemoAppleDataServer
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            key = try RSAPrivateKey.generate(bits: 2048)
            kid = SigningKeys.defaultKid(for: key)
            try SigningKeys.write(key: key, kid: kid, keyPath: dir.appendingPathComponent("key.pem").path,
                                  jwksPath: dir.appendingPathComponent("jwks.json").path)
            let jwks = try String(contentsOf: dir.appendingPathComponent("jwks.json"), encoding: .utf8)
            if config == nil {
                try DemoConfiguration.yaml.write(to: dir.appendingPathComponent("demo.yaml"), atomically: true, encoding: .utf8)
            }
            issuer = try KeySetServer(document: jwks, port: jwksPort)
            upstream = try SampleUpstream(port: upstreamPort)
            // The gateway's own issuer: its signing key, and the test App Attest CA the simulated iPhone uses.
            try RSAPrivateKey.generate(bits: 2048).pemRepresentation()
                .write(to: dir.appendingPathComponent("issuer-key.pem"), atomically: true, encoding: .utf8)
            phone = try DemoIPhone(teamId: Self.teamId, bundleId: Self.bundleId)
            try phone.ca.rootPEM.write(to: dir.appendingPathComponent("appattest-root.pem"), atomically: true, encoding: .utf8)
            // Fraud risk: the receipt CA the iPhone's receipts are signed by, a throwaway DeviceCheck key, and the demo
            // stand-in for Apple's App Attest data server (never Apple) answering risk metric 1, a normal phone's.
            try phone.receiptCA.rootPEM.write(to: dir.appendingPathComponent("receipt-root.pem"), atomically: true, encoding: .utf8)
            try ES256PrivateKey.generate().pemRepresentation()
                .write(to: dir.appendingPathComponent("devicecheck.p8"), atomically: true, encoding: .utf8)
            apple = try DemoAppleDataServer(receiptCA: phone.receiptCA, riskMetric: Self.demoRiskMetric)
            // The simulated Android phone: its test attestation root, and an empty status list in place of Google's.
            android = try DemoAndroidPhone(packageName: Self.bundleId, signingCertificateDigest: Self.androidSigningDigest)
            try android.ca.rootPEM.write(to: dir.appendingPathComponent("android-root.pem"), atomically: true, encoding: .utf8)
            try #"{"entries":{}}"#.write(to: dir.appendingPathComponent("android-status.json"), atomically: true, encoding: .utf8)
        } catch {
            printError("appcheck-gateway: demo: \(error)")
            throw ExitCode(1)
        }
        var env = ProcessInfo.processInfo.environment
        env["DEMO_UPSTREAM_PORT"] = String(upstream.address.port)
        env["DEMO_JWKS_URL"] = issuer.url
        env["DEMO_ISSUER_KEY"] = dir.appendingPathComponent("issuer-key.pem").path
        env["DEMO_APPATTEST_ROOT"] = dir.appendingPathComponent("appattest-root.pem").path
        env["DEMO_RECEIPT_ROOT"] = dir.appendingPathComponent("receipt-root.pem").path
        env["DEMO_DEVICECHECK_KEY"] = dir.appendingPathComponent("devicecheck.p8").path
        env["DEMO_APPLE_DATA_URL"] = apple.url
        env["DEMO_ANDROID_ROOT"] = dir.appendingPathComponent("android-root.pem").path
        env["DEMO_ANDROID_STATUS"] = "file://" + dir.appendingPathComponent("android-status.json").path
        // Nothing is read relative to the working directory: the built-in configuration is served from the
        // demo's own directory unless --config names a file.
        let configPath = config ?? dir.appendingPathComponent("demo.yaml").path
        let settings: Settings
        switch ConfigLoader.load(path: configPath, environment: env) {
        case .success(let s): settings = s
        case .failure(let errors):
            for e in errors.errors { printError(e.description) }
            throw ExitCode(1)
        }
        let server = GatewayServer(settings: settings, logSink: LogSink(fd: 2, level: .warning))
        let started = Date()
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
        // The memory replay store refuses tokens minted before it started plus clock_skew (docs/replay.md: a previous
        // process may have accepted them). The demo's single-use token is therefore dated clock_skew ahead,
        // from the next whole second (iat is in seconds): valid at once, as the verifier allows iat up to
        // now + clock_skew.
        while Int(Date().timeIntervalSince1970) <= now { usleep(20_000) }
        let skew = Int(settings.appCheck.clockSkew.rounded(.up))
        let limited = (try? TokenMinter.mint(key: key, kid: kid, projectNumber: Self.projectNumber, projectId: Self.projectId,
                                             appId: Self.appId, issuedAt: now + 1 + skew, ttl: 300,
                                             jti: SigningKeys.randomJTI())) ?? "?"
        let keyPath = dir.appendingPathComponent("key.pem").path
        // The simulated iPhone attests through the gateway's own issuer (with the built-in config), then asserts for
        // a limited-use token. Its limited-use token is asked for after the same clock_skew wait as above.
        var device = ""
        if config == nil, let port = server.listenAddresses.first?.port {
            let methods = "/appcheck/v1/projects/\(Self.projectNumber)/apps/\(Self.appId)"
            do {
                let attested = try phone.attest(port: port, methodBase: methods)
                let refreshed = Self.refreshReceipts(server)
                while Date().timeIntervalSince(started) < settings.appCheck.clockSkew + 1 { usleep(50_000) }
                let asserted = try phone.assert(port: port, methodBase: methods, limitedUse: true)
                device = """

                6. The gateway is an App Check provider too: a simulated iPhone (a test App Attest CA made just now,
                   trusted by root_ca_file) attested its key through POST \(methods):exchangeAppAttestAttestation
                   and got this session token, which opens the enforced route like Firebase's:
                curl -i -H 'X-Firebase-AppCheck: \(attested)' http://\(gw)/api/orders

                7. It then asserted (exchangeAppAttestAssertion) for a limited-use token: 200 once, 401 reused after
                curl -i -X POST -H 'X-Firebase-AppCheck: \(asserted)' http://\(gw)/api/redeem
                curl -i -X POST -H 'X-Firebase-AppCheck: \(asserted)' http://\(gw)/api/redeem

                8. Debug tokens for CI (debug_secrets), and the issuer's public key set
                curl -s -X POST -d '{"debug_token":"demo-debug-secret-change-me"}' http://\(gw)\(methods):exchangeDebugToken
                curl -s http://\(gw)/appcheck/v1/jwks

                9. Fraud risk: right after attesting, the iPhone's receipt was refreshed (\(refreshed) refreshed) by a DEMO
                   STAND-IN for Apple's App Attest data server (\(apple.url), not Apple), which answered Apple's risk
                   metric \(Self.demoRiskMetric) (attestations on this device in 30 days: a normal phone). The limited-use
                   token of step 7 carries it as "risk" (the redeem route admits at most max_risk: 10); the dashboard's
                   Fraud risk line (http://\(admin)/dashboard) shows the key in bucket ≤\(Self.demoRiskMetric), as do
                curl -s http://\(admin)/metrics | grep appcheck_issuer_risk_metric
                curl -s http://\(admin)/dashboard.json | grep -o '"hour":{"+Inf"[^}]*}'

                """
            } catch {
                device = "\n6. The simulated iPhone could not attest: \(error)\n"
            }
            let androidMethods = "/appcheck/v1/projects/\(Self.projectNumber)/apps/\(Self.androidAppId)"
            do {
                _ = try android.attest(port: port, methodBase: androidMethods)
                let asserted = try android.assert(port: port, methodBase: androidMethods, limitedUse: false)
                device += """

                10. Beside the iPhone, a simulated Android phone (no Play services: Android Key Attestation with a test
                    CA made just now, trusted by android.root_ca_file; an empty local status list) attested a Keystore key
                    through POST \(androidMethods):exchangeAndroidKeyAttestation, then signed a challenge
                    (exchangeAndroidKeyAssertion) for this session token, provider "android_key":
                curl -i -H 'X-Firebase-AppCheck: \(asserted)' http://\(gw)/api/orders

                """
            } catch {
                device += "\n10. The simulated Android phone could not attest: \(error)\n"
            }
        }
        print("""
        AppCheck Gateway demo is running (Ctrl-C to stop). Ready: \(server.readinessProblems().isEmpty ? "yes" : "no")
          gateway   http://\(gw)
          upstream  http://\(upstream.address)   (built-in sample: echoes what it receives as JSON)
          key set   \(issuer.url)   (a local issuer standing in for Firebase; key in \(keyPath))
          admin     http://\(admin)
          config    \(configPath)\(config == nil ? "   (built in, the same as Config/demo.yaml)" : "")
          dashboard http://\(admin)/dashboard   (can each route be enforced yet? steps 1-4 move its verdicts)

        Paste the steps in order into one shell (they share $SESSION and $LIMITED). A route has a verdict on the
        dashboard once it has \(Self.requests(settings.dashboard.minRequests)) in the window (dashboard.min_requests; \(Self.requests(1000)) in production).

        1. A valid App Check token on an enforced route: 200, and the upstream sees X-AppCheck-Status: verified;
           four more make 5 (orders: ready to enforce)
        SESSION='\(session)'
        curl -i -H "X-Firebase-AppCheck: $SESSION" http://\(gw)/api/orders
        for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code} ' -H "X-Firebase-AppCheck: $SESSION" http://\(gw)/api/orders; done; echo

        2. No token on the enforced route: 401 app_check_token_missing (orders: investigate, 1 of 6 unknown origin)
        curl -i http://\(gw)/api/orders

        3. A monitored route forwards anyway and tells the upstream why (X-AppCheck-Reason: missing); four with
           the token make 5 (public: investigate, 1 of 5 unknown origin: what enforcing would refuse)
        curl -i http://\(gw)/public/hello
        for i in 1 2 3 4; do curl -s -o /dev/null -w '%{http_code} ' -H "X-Firebase-AppCheck: $SESSION" http://\(gw)/public/hello; done; echo

        4. A limited-use token on the replay-protected route: 200 the first time, 401 app_check_token_reused after;
           three more tries make 5 (redeem: wait, 4 of 5 reused)
        LIMITED='\(limited)'
        curl -i -X POST -H "X-Firebase-AppCheck: $LIMITED" http://\(gw)/api/redeem
        curl -i -X POST -H "X-Firebase-AppCheck: $LIMITED" http://\(gw)/api/redeem
        for i in 1 2 3; do curl -s -o /dev/null -w '%{http_code} ' -X POST -H "X-Firebase-AppCheck: $LIMITED" http://\(gw)/api/redeem; done; echo

        5. Firebase's request categories, per route, as Prometheus metrics; each route's dashboard verdicts (hour, day, week)
        curl -s http://\(admin)/metrics | grep appcheck_requests_total
        curl -s http://\(admin)/dashboard.json | grep -o '"name":"[a-z]*"\\|"verdict":"[a-z ]*"'
        \(device)
        More tokens (valid for an hour; --limited-use for single-use ones):
        \(Self.executableForPasting()) mint --key \(keyPath) --project-number \(Self.projectNumber) --project-id \(Self.projectId) --app-id \(Self.appId)

        """)
        fflush(nil)
        server.runUntilTerminated(configPath: configPath, environment: env)
        apple.stop()
        upstream.stop()
        issuer.stop()
        try? FileManager.default.removeItem(at: dir)
    }

    /// The risk metric the demo's stand-in for Apple's data server answers: 1, a normal phone's.
    static let demoRiskMetric = 1

    /// One pass of the issuer's receipt refresher, waited for; how many receipts it refreshed (0 when none runs).
    static func refreshReceipts(_ server: GatewayServer) -> Int {
        let done = DispatchSemaphore(value: 0)
        let refreshed = Mutex(0)
        Task {
            let summary = await server.refreshReceiptsNow()
            refreshed.withLock { $0 = summary?.refreshed ?? 0 }
            done.signal()
        }
        done.wait()
        return refreshed.withLock { $0 }
    }

    /// "1 request", "5 requests".
    static func requests(_ n: Int) -> String { n == 1 ? "1 request" : "\(n) requests" }

    /// How the printed `mint` command names this binary: as it was invoked when that works from any directory
    /// (a bare name found on `PATH`, or an absolute path), else made absolute against the working directory.
    static func executableForPasting() -> String {
        let invoked = CommandLine.arguments.first ?? "appcheck-gateway"
        guard invoked.contains("/"), !invoked.hasPrefix("/") else { return invoked }
        return URL(fileURLWithPath: invoked).standardizedFileURL.path
    }
}
