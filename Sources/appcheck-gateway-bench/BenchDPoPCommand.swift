import AppCheck
import ArgumentParser
import Foundation
import GatewayTools

/// `appcheck-gateway-bench dpop`: the material of Benchmarks/callgrind.sh's case F. Makes a fresh ES256 device key,
/// mints one session token bound to it (`cnf.jkt`, RFC 9449 §6.1) with the given RSA signing key, and prints the
/// token on the first line and `--count` proofs for `GET --htu` after it, one a line, each with its own `jti`, all
/// with `iat` = now and `ath` = the token's hash (§4.2). The route under test needs a `dpop_max_age` longer than
/// the time between this command and the last request.
struct BenchDPoP: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dpop",
        abstract: "Print a DPoP-bound session token and COUNT fresh proofs for it (Benchmarks/callgrind.sh, case F).")

    @Option(help: "The RSA signing key (PEM) made by `appcheck-gateway keygen`.") var key: String
    @Option(name: .customLong("project-number"), help: "Firebase project number.") var projectNumber: String
    @Option(name: .customLong("app-id"), help: "The App ID (the sub claim).") var appId: String
    @Option(help: "The proofs' htu (scheme, host and path of the requests).") var htu: String
    @Option(help: "How many proofs.") var count = 1000

    func validate() throws {
        guard count >= 1 && count <= 10_000_000 else { throw ValidationError("--count must be 1...10000000") }
    }

    func run() throws {
        do {
            let signing = try SigningKeys.load(keyPath: key)
            guard let device = DPoPPrivateKey.generate(.es256) else {
                printError("appcheck-gateway-bench: dpop: cannot make a P-256 key")
                throw ExitCode(1)
            }
            let now = Int(Date().timeIntervalSince1970)
            let claims = "{\"iss\":\"https://firebaseappcheck.googleapis.com/\(projectNumber)\""
                + ",\"sub\":\(JSONText.quote(appId)),\"aud\":[\"projects/\(projectNumber)\"]"
                + ",\"exp\":\(now + 3600),\"iat\":\(now),\"cnf\":{\"jkt\":\"\(device.thumbprint)\"}}"
            let token = try TokenMinter.mintRaw(
                headerJSON: "{\"alg\":\"RS256\",\"kid\":\(JSONText.quote(SigningKeys.defaultKid(for: signing))),\"typ\":\"JWT\"}",
                payloadJSON: claims, key: signing)
            var out = token + "\n"
            for _ in 0..<count {
                guard let proof = device.proof(htm: "GET", htu: htu, iat: Double(now), jti: try TokenMinter.randomJTI(),
                                               accessToken: token) else {
                    printError("appcheck-gateway-bench: dpop: signing a proof failed")
                    throw ExitCode(1)
                }
                out += proof + "\n"
                if out.utf8.count > 1 << 20 { print(out, terminator: ""); out = "" }
            }
            print(out, terminator: "")
        } catch let exit as ExitCode {
            throw exit
        } catch {
            printError("appcheck-gateway-bench: dpop: \(error)")
            throw ExitCode(1)
        }
    }
}
