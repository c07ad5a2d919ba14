/// Why an ES256 (ECDSA P-256 with SHA-256, RFC 7518 §3.4) key could not be loaded or used.
public enum ES256KeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The input is not an unencrypted PEM/DER key of the expected kind.
    case invalidEncoding(String)
    /// The key is not an EC key on P-256 (prime256v1).
    case notP256
    /// An OpenSSL call failed (named).
    case openSSL(String)

    /// A short English reason.
    public var description: String {
        switch self {
        case .invalidEncoding(let why): "invalid ES256 key: \(why)"
        case .notP256: "the key is not an EC P-256 key"
        case .openSSL(let what): "OpenSSL \(what) failed"
        }
    }
}
