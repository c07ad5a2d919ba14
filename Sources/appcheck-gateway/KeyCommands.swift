import AppCheck
import ArgumentParser
import Foundation
import Gateway

struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make an RSA signing key and its JWKS, for local issuers and tests.")
    @Option(help: "Where to write the private key (PEM, mode 0600).") var key: String
    @Option(help: "Where to write the public key set (JWKS).") var jwks: String
    @Option(help: "Key size: 2048, 3072 or 4096.") var bits: Int = 2048
    @Option(help: "Key id (default: derived from the public key).") var kid: String?

    func validate() throws {
        guard [2048, 3072, 4096].contains(bits) else { throw ValidationError("--bits must be 2048, 3072 or 4096") }
    }

    func run() throws {
        do {
            let k = try RSAPrivateKey.generate(bits: bits)
            let id = kid ?? SigningKeys.defaultKid(for: k)
            try SigningKeys.write(key: k, kid: id, keyPath: key, jwksPath: jwks)
            print("kid \(id): private key \(key), key set \(jwks)")
        } catch {
            printError("appcheck-gateway: keygen: \(error)")
            throw ExitCode(1)
        }
    }
}

struct Mint: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a signed token shaped exactly like Firebase's. For development and tests only.")
    @Option(help: "The signing key (PEM) made by keygen.") var key: String
    @Option(name: .customLong("project-number"), help: "Firebase project number.") var projectNumber: String
    @Option(name: .customLong("app-id"), help: "The App ID (the sub claim).") var appId: String
    @Option(name: .customLong("project-id"), help: "Firebase project id (adds a second audience).") var projectId: String?
    @Option(help: "Lifetime, e.g. 1h, 30m (default 1h; 5m with --limited-use).") var ttl: String?
    @Flag(name: .customLong("limited-use"), help: "A limited-use token: 5-minute lifetime and a random jti.") var limitedUse = false
    @Option(help: "Key id (default: derived from the key, as keygen does).") var kid: String?

    func run() throws {
        let lifetime: Double
        if let ttl {
            guard let d = parseDuration(ttl), d >= 1 else {
                printError("appcheck-gateway: mint: --ttl \(ttl) is not a duration like 30s, 5m or 1h")
                throw ExitCode(1)
            }
            lifetime = d
        } else {
            lifetime = limitedUse ? 300 : 3600
        }
        guard !projectNumber.isEmpty, projectNumber.allSatisfy(\.isASCII), projectNumber.allSatisfy(\.isNumber) else {
            printError("appcheck-gateway: mint: --project-number must be digits")
            throw ExitCode(1)
        }
        do {
            let k = try SigningKeys.load(keyPath: key)
            let token = try TokenMinter.mint(
                key: k, kid: kid ?? SigningKeys.defaultKid(for: k), projectNumber: projectNumber, projectId: projectId,
                appId: appId, issuedAt: Int(Date().timeIntervalSince1970), ttl: Int(lifetime),
                jti: limitedUse ? SigningKeys.randomJTI() : nil)
            print(token)
        } catch {
            printError("appcheck-gateway: mint: \(error)")
            throw ExitCode(1)
        }
    }
}
