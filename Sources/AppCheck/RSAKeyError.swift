/// Why an RSA key could not be made, loaded or used.
public enum RSAKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not a key of the expected encoding (JWK numbers, DER, PEM).
    case invalidEncoding(String)
    /// The key is not an RSA key.
    case notRSA
    /// Key generation accepts 2048, 3072 and 4096 bits only.
    case unsupportedSize(Int)
    /// OpenSSL failed in `operation`.
    case openSSL(String)

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .invalidEncoding(let what): return "invalid key encoding: \(what)"
        case .notRSA: return "not an RSA key"
        case .unsupportedSize(let bits): return "unsupported RSA key size \(bits) (use 2048, 3072 or 4096)"
        case .openSSL(let operation): return "OpenSSL failed: \(operation)"
        }
    }
}
