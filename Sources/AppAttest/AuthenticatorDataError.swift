/// Why authenticator data did not parse.
public enum AuthenticatorDataError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Fewer bytes than the fixed fields need.
    case tooShort
    /// The declared credential ID length exceeds `AuthenticatorData.maxCredentialIdLength`.
    case credentialIdTooLong
    /// The COSE key is not well-formed CBOR of the subset.
    case credentialPublicKey(CBORError)
    /// The COSE key is CBOR but not a map.
    case credentialPublicKeyNotMap
    /// The bytes after the fixed fields (or the COSE key) are not well-formed CBOR of the subset.
    case extensions(CBORError)
    /// The item after the fixed fields (or the COSE key) is not a map.
    case extensionsNotMap
    /// Bytes follow the extensions map.
    case trailingBytes

    /// A short English reason without any input bytes.
    public var description: String {
        switch self {
        case .tooShort: "authenticator data too short"
        case .credentialIdTooLong: "credential ID too long"
        case .credentialPublicKey(let e): "credential public key: \(e)"
        case .credentialPublicKeyNotMap: "credential public key is not a CBOR map"
        case .extensions(let e): "extensions: \(e)"
        case .extensionsNotMap: "trailing item is not an extensions map"
        case .trailingBytes: "bytes after the extensions map"
        }
    }
}
