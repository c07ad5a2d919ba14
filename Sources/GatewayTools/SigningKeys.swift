import AppCheck
import Foundation
import Gateway

/// Key files for the local issuer (`keygen`, `mint`, the demo and tests): a PKCS#8 PEM private key and a
/// JWKS holding its public half.
public enum SigningKeys {
    /// The default `kid`: the first 16 hex characters of SHA-256 of the public key's DER, so `mint` finds
    /// the same kid `keygen` wrote without being told.
    public static func defaultKid(for key: RSAPrivateKey) -> String {
        guard let der = (try? key.publicKey)?.derRepresentation else { return "appcheck-gateway" }
        return String(SHA256Digest.hex(SHA256Digest.hash(der)).prefix(16))
    }

    /// Writes `key` (mode 0600) and a JWKS with its public key under `kid`.
    public static func write(key: RSAPrivateKey, kid: String, keyPath: String, jwksPath: String) throws {
        let pem = try key.pemRepresentation()
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(pem.utf8),
                                             attributes: [.posixPermissions: 0o600]) else {
            throw ToolError("cannot write \(keyPath)")
        }
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
