import CryptoKit
import Foundation

/// The device's DPoP key for `GatewayDPoP`: P-256 in the Secure Enclave, so the private key never leaves it; a
/// software key on the simulator, which has no enclave (development only).
///
/// Not compiled by this project (no Apple SDK on its Linux machines; see README.md). Every CryptoKit name is from
/// Apple's public API: `SecureEnclave.isAvailable`,
/// `SecureEnclave.P256.Signing.PrivateKey(compactRepresentable:accessControl:authenticationContext:)` (defaults kept
/// but the first), `.dataRepresentation` / `init(dataRepresentation:authenticationContext:)`,
/// `P256.Signing.PublicKey.x963Representation`, `P256.Signing.ECDSASignature.rawRepresentation` (r ‖ s, JWS ES256's
/// form), `SHA256.hash(data:)`.
public struct SecureEnclaveDPoPKey: DPoPKey, @unchecked Sendable {
    private enum Key {
        case enclave(SecureEnclave.P256.Signing.PrivateKey)
        case software(P256.Signing.PrivateKey)
    }

    private let key: Key
    /// Where the key's handle is kept: for the Secure Enclave an encrypted blob only this device's enclave can use
    /// (the private key never leaves it); store it in the keychain in a real app (UserDefaults keeps this short).
    private static let storageKey = "appcheck-gateway.dpop-key"

    /// The device's key: loaded, or made on first use.
    public static func deviceKey() throws -> SecureEnclaveDPoPKey {
        let stored = UserDefaults.standard.data(forKey: storageKey)
        if SecureEnclave.isAvailable {
            if let stored, let key = try? SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: stored) {
                return SecureEnclaveDPoPKey(key: .enclave(key))
            }
            let key = try SecureEnclave.P256.Signing.PrivateKey(compactRepresentable: false)
            UserDefaults.standard.set(key.dataRepresentation, forKey: storageKey)
            return SecureEnclaveDPoPKey(key: .enclave(key))
        }
        // The simulator has no Secure Enclave: a software key, for development only.
        if let stored, let key = try? P256.Signing.PrivateKey(rawRepresentation: stored) {
            return SecureEnclaveDPoPKey(key: .software(key))
        }
        let key = P256.Signing.PrivateKey()
        UserDefaults.standard.set(key.rawRepresentation, forKey: storageKey)
        return SecureEnclaveDPoPKey(key: .software(key))
    }

    public var x963PublicKey: Data {
        switch key {
        case .enclave(let key): key.publicKey.x963Representation
        case .software(let key): key.publicKey.x963Representation
        }
    }

    public func signature(for data: Data) throws -> Data {
        switch key {
        case .enclave(let key): try key.signature(for: data).rawRepresentation
        case .software(let key): try key.signature(for: data).rawRepresentation
        }
    }

    public func sha256(_ data: Data) -> Data { Data(SHA256.hash(data: data)) }
}
