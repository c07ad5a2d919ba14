import Foundation
@testable import Gateway
@testable import GatewayConfig
import GatewayTools
@testable import TestSupport
import Testing

/// One bad configuration per error message the loader can give (issue 25, "Tests you can trust"): each case is a
/// minimal YAML document with one mistake, the fragment of the message it must produce, and the `LINE:COLUMN` of
/// the offending key or value. Messages that differ only by the key they name (every `int`, `duration`, `size`,
/// `choice`… field) are one template and appear once; the cases live in `ConfigErrorTable+Section.swift`.
///
/// Files: `${D}` expands to the shared TLS fixtures (`TLSFixtures`: certificates and keys made by the `openssl`
/// CLI, good and bad), `${E}` to a few more made here. Expansion happens after parsing, so a path never shifts a
/// column.
///
/// Not in the table, because no configuration can reach them:
/// - `ConfigDecoder.readableFile` "… is not readable": the suite runs as root, for whom `access(R_OK)` always
///   succeeds (a non-root reader would get it for a mode-000 file).
/// - `CertificateAudit` "cannot read the certificate file" / "cannot read the private key file", and the
///   "cannot be opened" of `certificateProblem` / `p256KeyProblem`: `readableFile` has already refused such files.
/// - `YAMLComposer` "cannot parse YAML: …" (libyaml out of memory, or an error kind its parser never sets),
///   `ConfigLoader` "invalid configuration" (the guard for a decoder that fails without an error), and
///   "replay.redis_url: \(error)" (`RedisEndpoint.parse` throws only `ReplayStoreError`).
/// - `p256KeyProblem` "the EC curve could not be read": OpenSSL names the curve of every EC key it loads, even one
///   written with explicit parameters (tried: `openssl ecparam -param_enc explicit` gives `prime256v1`).
///
/// Not covered: `CertificateAudit.weakSignatureHash` "an unsupported signature algorithm" needs a certificate whose
/// signature algorithm OpenSSL cannot map to a digest, which the `openssl` CLI does not make.
@Suite struct ConfigErrorTableTests {
    @Test(arguments: ConfigErrorTable.all)
    func everyConfigErrorNamesItsMessageFileLineAndColumn(_ c: ConfigErrorCase) throws {
        let environment = try ConfigErrorTable.environment()
        let result: Result<Settings, ConfigErrors>
        let path: String
        switch c.input {
        case let .yaml(yaml):
            path = "gw.yaml"
            result = ConfigLoader.load(yaml: yaml, path: path, environment: environment, cores: 2)
        case let .file(bytes):
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("config-table-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            path = dir.appendingPathComponent("gw.yaml").path
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            result = ConfigLoader.load(path: path, environment: environment)
        case .missingFile:
            path = "/no/such/folder/gw.yaml"
            result = ConfigLoader.load(path: path, environment: environment)
        }
        guard case let .failure(errors) = result else {
            Issue.record("loaded, expected \(c.fragment)")
            return
        }
        let matching = errors.errors.filter { $0.message.contains(c.fragment) }
        #expect(matching.count == 1, "\(errors)")
        #expect(errors.errors.count == c.errorCount, "\(errors)")
        let e = try #require(matching.first, "\(errors)")
        #expect(e.description.hasPrefix("\(path):\(c.line):\(c.column): "), "\(e)")
    }
}

/// One row of the table.
struct ConfigErrorCase: Sendable, CustomTestStringConvertible {
    enum Input: Sendable {
        /// Loaded as `gw.yaml` with `ConfigLoader.load(yaml:)`.
        case yaml(String)
        /// Written to a file and loaded with `ConfigLoader.load(path:)`.
        case file([UInt8])
        /// `ConfigLoader.load(path:)` of a path that does not exist.
        case missingFile
    }

    var input: Input
    var line: Int
    var column: Int
    var fragment: String
    /// Errors in all: 1 but where the mistake necessarily brings a second one.
    var errorCount = 1

    var testDescription: String { "\(line):\(column) \(fragment)" }
}

/// `bad(yaml, line, column, fragment)`: loading `yaml` gives an error containing `fragment` at `line:column`.
func bad(_ yaml: String, _ line: Int, _ column: Int, _ fragment: String, errors: Int = 1) -> ConfigErrorCase {
    ConfigErrorCase(input: .yaml(yaml), line: line, column: column, fragment: fragment, errorCount: errors)
}

enum ConfigErrorTable {
    static var all: [ConfigErrorCase] { loader + server + tls + appCheck + replay + upstreams + dashboard + routes + dpop + issuer + issuerApps }

    /// The smallest valid file (`app_check`, one upstream, one route), 9 lines.
    static let tail = ConfigFixture.minimal + "\n"
    /// `app_check` alone, 2 lines.
    static let appCheckYAML = "app_check:\n  project_number: \"123456789012\"\n"
    /// `upstreams` with `api`, 3 lines.
    static let upstreamsYAML = "upstreams:\n  api:\n    url: http://127.0.0.1:3000\n"
    /// `routes` with one catch-all route to `api`, 4 lines.
    static let routesYAML = "routes:\n  - name: all\n    prefix: /\n    upstream: api\n"

    /// `D`: `TLSFixtures`; `E`: the files below, made once per process.
    static func environment() throws -> [String: String] {
        ["D": try TLSFixtures.shared().dir, "E": try ExtraFiles.shared()]
    }

    /// Files `TLSFixtures` does not have: a self-signed Ed25519 certificate (ATS refuses the key type), a chain whose
    /// second PEM block is broken, and bytes that are not UTF-8.
    enum ExtraFiles {
        private static let made: Result<String, FixtureError> = Result {
            let dir = NSTemporaryDirectory() + "config-table-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            func openssl(_ arguments: [String]) throws {
                let r = try Run.command("openssl", arguments, timeout: 60)
                guard r.status == 0 else { throw FixtureError(text: "openssl \(arguments.joined(separator: " ")): \(r.stderr)") }
            }
            try openssl(["req", "-x509", "-newkey", "ed25519", "-nodes", "-keyout", dir + "/ed25519.key",
                         "-out", dir + "/ed25519.pem", "-days", "30", "-subj", "/CN=localhost"])
            let good = try String(contentsOfFile: try TLSFixtures.shared().serverCert, encoding: .utf8)
            try (good + "-----BEGIN CERTIFICATE-----\nMIIBbroken\n-----END CERTIFICATE-----\n")
                .write(toFile: dir + "/broken-chain.pem", atomically: true, encoding: .utf8)
            try Data([0xFF, 0xFE, 0x80, 0x00, 0xC3]).write(to: URL(fileURLWithPath: dir + "/binary.pem"))
            return dir
        }.mapError { FixtureError(text: "\($0)") }

        struct FixtureError: Error, Sendable { var text: String }

        static func shared() throws -> String { try made.get() }
    }
}
