import AppAttest
import AppAttestSimulator
import AppCheck
import ArgumentParser
import Foundation
import Gateway
import GatewayProcess
import GatewayConfig
import GatewayTools
import JSONLog

/// `appcheck-gateway-bench issuer`: the issuer's exchange latency, for Benchmarks/issuer-latency.sh. Starts
/// a gateway with an `issuer:` section in this process (one loop thread), then, one call at a time from one client
/// thread, times `exchangeAppAttestAttestation` (a new simulated device each call) and `exchangeAppAttestAssertion`
/// (one device, its counter rising) over HTTP/1.1 on 127.0.0.1, a new connection each. Challenges and the
/// simulated device's own work are not timed. Prints median, p99 and max per method.
struct BenchIssuer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "issuer",
        abstract: "Time the issuer's App Attest exchanges against an in-process gateway.")

    @Option(help: "Exchanges of each method.") var calls = 1000
    @Option(help: "Issuer state: memory or sqlite.") var state = "sqlite"

    static let appId = "1:123456789012:ios:0123456789abcdef"
    static let teamId = "BENCHTEAM1"
    static let bundleId = "com.example.bench"

    func validate() throws {
        guard calls >= 1 && calls <= 1_000_000 else { throw ValidationError("--calls must be 1...1000000") }
        guard state == "memory" || state == "sqlite" else { throw ValidationError("--state must be memory or sqlite") }
    }

    func run() throws {
        GatewayServer.blockSignals()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("appcheck-bench-issuer-\(getpid())")
        defer { try? FileManager.default.removeItem(at: dir) }
        let appId = AppAttestAppID(teamId: Self.teamId, bundleId: Self.bundleId)
        let ca: SimulatedAppAttestCA
        let configPath = dir.appendingPathComponent("bench.yaml").path
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            ca = try SimulatedAppAttestCA(now: Int64(Date().timeIntervalSince1970))
            try ca.rootPEM.write(to: dir.appendingPathComponent("root.pem"), atomically: true, encoding: .utf8)
            let signing = try RSAPrivateKey.generate(bits: 2048)
            try signing.pemRepresentation().write(to: dir.appendingPathComponent("sign.pem"), atomically: true, encoding: .utf8)
            // Firebase's key set is not used; any valid set keeps the gateway quiet.
            try JWKSet.document(for: [(kid: "bench", key: signing.publicKey)])
                .write(to: dir.appendingPathComponent("jwks.json"), atomically: true, encoding: .utf8)
            try """
            server: { listen: ["127.0.0.1:0"], admin_listen: "127.0.0.1:0", threads: 1, log_level: error }
            app_check: { project_number: "123456789012", jwks: { url: "file://\(dir.path)/jwks.json" } }
            upstreams: { none: { url: "http://127.0.0.1:9" } }
            routes: [{ name: all, prefix: /, upstream: none, enforcement: off }]
            issuer:
              issuer_url: https://bench.example.com/appcheck
              signing_keys: [\(dir.path)/sign.pem]
              max_exchanges_per_second: 1000000
              state: { store: \(state), sqlite_path: \(dir.path)/issuer.sqlite }
              apps:
                - app_id: "\(Self.appId)"
                  team_id: \(Self.teamId)
                  bundle_id: \(Self.bundleId)
                  app_attest: { environments: [production], root_ca_file: \(dir.path)/root.pem }
            """.write(toFile: configPath, atomically: true, encoding: .utf8)
        } catch {
            printError("appcheck-gateway-bench: issuer: \(error)")
            throw ExitCode(1)
        }
        let settings: Settings
        switch ConfigLoader.load(path: configPath) {
        case .success(let s): settings = s
        case .failure(let errors):
            for e in errors.errors { printError(e.description) }
            throw ExitCode(1)
        }
        let server = GatewayServer(settings: settings, logSink: LogSink(fd: 2, level: .error))
        do { try server.start() } catch {
            printError("appcheck-gateway-bench: issuer: cannot start the gateway: \(error)")
            throw ExitCode(1)
        }
        defer { server.shutdown(grace: 0.1) }
        guard let port = server.listenAddresses.first?.port else { throw ExitCode(1) }
        let base = "/appcheck/v1/projects/123456789012/apps/\(Self.appId)"

        func challenge() throws -> [UInt8] {
            let answer = try DemoIPhone.post(port: port, path: base + ":generateAppAttestChallenge", body: "")
            guard let text = answer.member("challenge")?.stringValue, let bytes = Data(base64Encoded: text) else {
                throw DemoIPhone.Failure("no challenge")
            }
            return [UInt8](bytes)
        }
        func timed(_ path: String, _ body: String) throws -> (Double, JSONValue) {
            let start = DispatchTime.now().uptimeNanoseconds
            let answer = try DemoIPhone.post(port: port, path: base + path, body: body)
            return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6, answer)
        }
        var attestations: [Double] = [], assertions: [Double] = []
        var device: SimulatedAppAttestDevice?
        var artifact: [UInt8] = []
        do {
            for _ in 0..<calls {
                let d = try SimulatedAppAttestDevice(ca: ca, appId: appId)
                let c = try challenge()
                let object = try d.attest(clientDataHash: AppAttestVerifier.clientDataHash(challenge: c),
                                          now: Int64(Date().timeIntervalSince1970))
                let body = #"{"keyId":"\#(Data(d.keyId).base64EncodedString())","attestation":"\#(Data(object).base64EncodedString())","challenge":"\#(Data(c).base64EncodedString())"}"#
                let (ms, answer) = try timed(":exchangeAppAttestAttestation", body)
                attestations.append(ms)
                guard let text = answer.member("artifact")?.stringValue, let bytes = Data(base64Encoded: text) else {
                    throw DemoIPhone.Failure("no artifact")
                }
                device = d
                artifact = [UInt8](bytes)
            }
            guard let device else { throw ExitCode(1) }
            for _ in 0..<calls {
                let c = try challenge()
                let assertion = try device.assert(clientData: artifact + c)
                let body = #"{"artifact":"\#(Data(artifact).base64EncodedString())","assertion":"\#(Data(assertion).base64EncodedString())","challenge":"\#(Data(c).base64EncodedString())"}"#
                assertions.append(try timed(":exchangeAppAttestAssertion", body).0)
            }
        } catch let error as ExitCode {
            throw error
        } catch {
            printError("appcheck-gateway-bench: issuer: \(error)")
            throw ExitCode(1)
        }
        print("issuer exchange latency over HTTP/1.1 on 127.0.0.1, \(calls) calls each, one client thread, state \(state)")
        for (name, samples) in [("exchangeAppAttestAttestation", attestations), ("exchangeAppAttestAssertion", assertions)] {
            let sorted = samples.sorted()
            func at(_ q: Double) -> Double { sorted[min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)] }
            print(String(format: "  %-29@ median %.3f ms  p99 %.3f ms  max %.3f ms", name as NSString, at(0.5), at(0.99), sorted.last ?? 0))
        }
    }
}
