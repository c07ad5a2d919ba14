import AppCheck
import Foundation
import GatewayConfig

/// Key files for the local issuer (`keygen`, `mint`, the demo and tests): a PKCS#8 PEM private key and a
/// JWKS holding its public half.
public enum SigningKeys {
    /// The default `kid`: the key's RFC 7638 JWK thumbprint, the `kid` the gateway's issuer publishes and signs
    /// with for a key in `issuer.signing_keys` (`IssuerKeys`), so `keygen` prints it and `mint` finds it again
    /// without being told.
    public static func defaultKid(for key: RSAPrivateKey) -> String {
        (try? key.publicKey)?.jwkThumbprint ?? "appcheck-gateway"
    }

    /// Writes `key` alone (PKCS#8 PEM, mode 0600).
    public static func write(key: RSAPrivateKey, keyPath: String) throws {
        let pem = try key.pemRepresentation()
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(pem.utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw ToolError("cannot write \(keyPath)")
        }
        // createFile applies the mode only to a new file; an existing one keeps its own.
        guard chmod(keyPath, 0o600) == 0 else { throw ToolError("cannot make \(keyPath) mode 0600") }
    }

    /// Writes `key` (mode 0600) and a JWKS with its public key under `kid`.
    public static func write(key: RSAPrivateKey, kid: String, keyPath: String, jwksPath: String) throws {
        try write(key: key, keyPath: keyPath)
        let jwks = JWKSet.document(for: [(kid: kid, key: try key.publicKey)])
        do { try jwks.write(toFile: jwksPath, atomically: true, encoding: .utf8) } catch {
            throw ToolError("cannot write \(jwksPath): \(error.localizedDescription)")
        }
    }

    public static func load(keyPath: String) throws -> RSAPrivateKey {
        guard let data = FileManager.default.contents(atPath: keyPath) else { throw ToolError("cannot read \(keyPath)") }
        do { return try RSAPrivateKey(pemRepresentation: String(decoding: data, as: UTF8.self)) } catch {
            throw ToolError("\(keyPath) is not an RSA private key in PEM: \(error)")
        }
    }

    /// A random 128-bit `jti` in hex.
    public static func randomJTI() -> String {
        var g = SystemRandomNumberGenerator()
        return String(format: "%016llx%016llx", g.next() as UInt64, g.next() as UInt64)
    }
}

/// A command-line failure: one readable line.
public struct ToolError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Parses `250ms`, `30s`, `5m`, `6h`, `7d` (the config's duration syntax) into seconds.
public func parseDuration(_ text: String) -> Double? { ConfigValueParser.duration(text) }
