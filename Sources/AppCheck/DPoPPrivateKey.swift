import COpenSSL

/// A client's DPoP key (ES256, ES384 or EdDSA/Ed25519) that signs proofs (RFC 9449 §4.2): for tests, benchmarks and
/// the fuzz target, which play the device. Never on the verification path. Immutable and safe to share between threads.
public struct DPoPPrivateKey: Sendable {
    let key: EVPKey
    public let algorithm: DPoPPublicKey.Algorithm

    /// A fresh key for `algorithm`.
    public static func generate(_ algorithm: DPoPPublicKey.Algorithm = .es256) -> DPoPPrivateKey? {
        let context: OpaquePointer?
        switch algorithm {
        case .edDSA: context = EVP_PKEY_CTX_new_from_name(nil, "ED25519", nil)
        case .es256, .es384: context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil)
        }
        guard let context else { ERR_clear_error(); return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(context) == 1 else { ERR_clear_error(); return nil }
        if algorithm != .edDSA {
            guard EVP_PKEY_CTX_set_group_name(context, algorithm.curve.crv) == 1 else { ERR_clear_error(); return nil }
        }
        guard EVP_PKEY_generate(context, &pkey) == 1, let pkey else { ERR_clear_error(); return nil }
        return DPoPPrivateKey(key: EVPKey(taking: pkey), algorithm: algorithm)
    }

    /// Loads an unencrypted PEM private key (PKCS#8 or SEC 1) of P-256, P-384 or Ed25519.
    public init?(pemRepresentation pem: String) {
        guard let key = parsePEMPrivateKey(pem) else { return nil }
        if EVP_PKEY_is_a(key.pointer, "ED25519") == 1 {
            algorithm = .edDSA
        } else if ES256PublicKey.isP256(key.pointer) {
            algorithm = .es256
        } else if EVP_PKEY_is_a(key.pointer, "EC") == 1, EVP_PKEY_get_bits(key.pointer) == 384 {
            algorithm = .es384
        } else {
            return nil
        }
        self.key = key
    }

    private init(key: EVPKey, algorithm: DPoPPublicKey.Algorithm) {
        self.key = key
        self.algorithm = algorithm
    }

    /// The public key's JWK members, in RFC 7638 order (`crv`, `kty`, `x`, `y`).
    public var publicJWK: [(String, String)] {
        let size = algorithm.curve.size
        if algorithm == .edDSA {
            var raw = [UInt8](repeating: 0, count: 32)
            var length = 32
            _ = EVP_PKEY_get_raw_public_key(key.pointer, &raw, &length)
            return [("crv", "Ed25519"), ("kty", "OKP"), ("x", Base64URL.encode(raw.prefix(length)))]
        }
        let point = (key.publicKeyDER() ?? []).suffix(2 * size)
        return [("crv", algorithm.curve.crv), ("kty", "EC"), ("x", Base64URL.encode(point.prefix(size))),
                ("y", Base64URL.encode(point.suffix(size)))]
    }

    /// The public JWK as JSON text.
    public var publicJWKJSON: String {
        "{" + publicJWK.map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}"
    }

    /// The RFC 7638 thumbprint (the `cnf.jkt` of tokens bound to this key).
    public var thumbprint: String {
        Base64URL.encode(SHA256Digest.hash(Array(publicJWKJSON.utf8)))
    }

    /// The JWS signature of `message`: R ‖ S for ES256/ES384 (RFC 7518 §3.4), the Ed25519 signature for EdDSA.
    public func sign(_ message: [UInt8]) -> [UInt8]? {
        guard let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        let digest: OpaquePointer? = switch algorithm {
        case .es256: EVP_sha256()
        case .es384: EVP_sha384()
        case .edDSA: nil
        }
        guard EVP_DigestSignInit(context, nil, digest, nil, key.pointer) == 1 else { ERR_clear_error(); return nil }
        var length = 160
        var out = [UInt8](repeating: 0, count: length)
        let ok = out.withUnsafeMutableBufferPointer { o in
            message.withUnsafeBufferPointer { EVP_DigestSign(context, o.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard ok == 1 else { ERR_clear_error(); return nil }
        if algorithm == .edDSA { return Array(out.prefix(length)) }
        let size = algorithm.curve.size
        let parsed: OpaquePointer? = out.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, length)
        }
        guard let parsed else { ERR_clear_error(); return nil }
        defer { ECDSA_SIG_free(parsed) }
        var raw = [UInt8](repeating: 0, count: 2 * size)
        let written = raw.withUnsafeMutableBufferPointer { o in
            (BN_bn2binpad(ECDSA_SIG_get0_r(parsed), o.baseAddress, Int32(size)),
             BN_bn2binpad(ECDSA_SIG_get0_s(parsed), o.baseAddress.map { $0 + size }, Int32(size)))
        }
        guard written.0 == Int32(size), written.1 == Int32(size) else { return nil }
        return raw
    }

    /// A proof: the given header and payload JSON texts, base64url-encoded and signed with this key.
    public func sign(headerJSON: String, payloadJSON: String) -> String? {
        let input = Base64URL.encode(Array(headerJSON.utf8)) + "." + Base64URL.encode(Array(payloadJSON.utf8))
        guard let signature = sign(Array(input.utf8)) else { return nil }
        return input + "." + Base64URL.encode(signature)
    }

    /// A well-formed proof for a request (RFC 9449 §4.2): header `{"typ":"dpop+jwt","alg":…,"jwk":…}`, claims
    /// `jti`, `htm`, `htu`, `iat` and, with `accessToken`, `ath`.
    public func proof(htm: String, htu: String, iat: Double, jti: String, accessToken: String? = nil) -> String? {
        let header = "{\"typ\":\"dpop+jwt\",\"alg\":\"\(algorithm.rawValue)\",\"jwk\":\(publicJWKJSON)}"
        var payload = "{\"jti\":\(JSONText.quote(jti)),\"htm\":\(JSONText.quote(htm)),\"htu\":\(JSONText.quote(htu)),\"iat\":\(Int(iat))"
        if let accessToken {
            payload += ",\"ath\":\"\(Base64URL.encode(SHA256Digest.hash(Array(accessToken.utf8))))\""
        }
        return sign(headerJSON: header, payloadJSON: payload + "}")
    }
}
