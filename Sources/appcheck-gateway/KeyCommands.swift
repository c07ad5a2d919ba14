import AppCheck
import ArgumentParser
import Foundation
import GatewayTools

struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make an RSA signing key (and, with --jwks, its public key set): for issuer.signing_keys, local issuers and tests.",
        discussion: """
        The printed kid is the key's RFC 7638 thumbprint: the kid the gateway's issuer publishes for this key in \
        issuer.signing_keys, and the one mint uses by default. An issuer signing key needs only --key:
          appcheck-gateway keygen --key /etc/appcheck-gateway/issuer/2026-11.pem
        """)
    @Option(help: "Where to write the private key (PEM, mode 0600).") var key: String
    @Option(help: "Where to write the public key set (JWKS); not needed for issuer.signing_keys, whose set the gateway publishes.") var jwks: String?
    @Option(help: "Key size: 2048, 3072 or 4096.") var bits: Int = 2048
    @Option(help: "Key id in the JWKS (default: the RFC 7638 thumbprint, as the issuer publishes).") var kid: String?

    func validate() throws {
        guard [2048, 3072, 4096].contains(bits) else { throw ValidationError("--bits must be 2048, 3072 or 4096") }
        if kid != nil && jwks == nil { throw ValidationError("--kid names the key in the JWKS: give --jwks too") }
    }

    func run() throws {
        do {
            let k = try RSAPrivateKey.generate(bits: bits)
            let id = kid ?? SigningKeys.defaultKid(for: k)
            if let jwks {
                try SigningKeys.write(key: k, kid: id, keyPath: key, jwksPath: jwks)
                print("kid \(id): private key \(key), key set \(jwks)")
            } else {
                try SigningKeys.write(key: k, keyPath: key)
                print("kid \(id): private key \(key) (RSA-\(bits); the issuer publishes it under this kid)")
            }
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
    @Option(help: "Lifetime, at least 1s, e.g. 1h, 30m, 90s (default 1h; 5m with --limited-use).") var ttl: String?
    @Flag(name: .customLong("limited-use"), help: "A limited-use token: 5-minute lifetime and a random jti.") var limitedUse = false
    @Option(help: "Key id (default: derived from the key, as keygen does).") var kid: String?
    @Option(help: "How many tokens to print, one per line (each with its own jti when --limited-use).") var count: Int = 1

    func validate() throws {
        guard count >= 1 && count <= 10_000_000 else { throw ValidationError("--count must be between 1 and 10000000") }
    }

    func run() throws {
        let lifetime: Double
        if let ttl {
            guard let d = parseDuration(ttl) else {
                printError("appcheck-gateway: mint: --ttl \(ttl) is not a duration like 30s, 5m or 1h")
                throw ExitCode(1)
            }
            guard d >= 1 else {
                printError("appcheck-gateway: mint: --ttl \(ttl) is too short: a token must live at least 1s (exp is after iat)")
                throw ExitCode(1)
            }
            lifetime = d.rounded(.down)
        } else {
            lifetime = limitedUse ? 300 : 3600
        }
        guard !projectNumber.isEmpty, projectNumber.allSatisfy(\.isASCII), projectNumber.allSatisfy(\.isNumber) else {
            printError("appcheck-gateway: mint: --project-number must be digits")
            throw ExitCode(1)
        }
        do {
            let k = try SigningKeys.load(keyPath: key)
            let id = kid ?? SigningKeys.defaultKid(for: k)
            let issuedAt = Int(Date().timeIntervalSince1970)
            var out = ""
            for i in 0..<count {
                // Distinct tokens even without --limited-use: the jti-less ones differ in iat and exp.
                let skew = limitedUse ? 0 : i % 600
                let token = try TokenMinter.mint(
                    key: k, kid: id, projectNumber: projectNumber, projectId: projectId, appId: appId,
                    issuedAt: issuedAt - skew, ttl: max(min(60, Int(lifetime)), Int(lifetime) + skew - i / 600),
                    jti: limitedUse ? SigningKeys.randomJTI() : nil)
                out += token + "\n"
                if out.utf8.count > 1 << 20 { print(out, terminator: ""); out = "" }
            }
            print(out, terminator: "")
        } catch {
            printError("appcheck-gateway: mint: \(error)")
            throw ExitCode(1)
        }
    }
}
