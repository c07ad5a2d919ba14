import COpenSSL
import Synchronization

/// The public key of a DPoP proof's `jwk` header (RFC 9449 §4.2), for the three algorithms SPEC §4.4 accepts:
/// ES256 (EC P-256), ES384 (EC P-384) and EdDSA (OKP Ed25519, RFC 8037). Immutable and safe to share between threads.
public struct DPoPPublicKey: Sendable {
    /// The JWS algorithms accepted for proofs; anything else (`none`, HS*, RS*, PS*, ES512, …) is refused.
    public enum Algorithm: String, Sendable, CaseIterable {
        case es256 = "ES256"
        case es384 = "ES384"
        case edDSA = "EdDSA"

        /// The JWK `kty` and `crv` a key for this algorithm has, and the size of each coordinate in bytes.
        var curve: (kty: String, crv: String, size: Int) {
            switch self {
            case .es256: ("EC", "P-256", 32)
            case .es384: ("EC", "P-384", 48)
            case .edDSA: ("OKP", "Ed25519", 32)
            }
        }
    }

    let key: EVPKey
    public let algorithm: Algorithm
    /// The RFC 7638 SHA-256 thumbprint, base64url without padding: what `cnf.jkt` holds (RFC 9449 §6.1).
    public let thumbprint: String

    /// DER prefixes of SubjectPublicKeyInfo for an uncompressed EC point (the point, 0x04 ‖ x ‖ y, follows).
    static let p384Prefix: [UInt8] = [0x30, 0x76, 0x30, 0x10, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
                                      0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22, 0x03, 0x62, 0x00]

    /// From a `jwk` header value for `algorithm`. Throws `DPoPRule.jwk` when it is not an object, has a private member
    /// (`d`, or RSA's `p`, `q`, `dp`, `dq`, `qi`, `oth`; RFC 9449 §4.3 check 7), has a `kty`/`crv` other than the
    /// algorithm's, coordinates of the wrong length or not strict base64url, or an EC point not on the curve.
    public init(jwk: JSONValue, algorithm: Algorithm) throws(DPoPRule) {
        guard case .object(let members) = jwk else { throw .jwk }
        for member in members where Self.privateMembers.contains(member.key) { throw .jwk }
        let want = algorithm.curve
        guard jwk.member("kty")?.stringEquals(want.kty) == true, jwk.member("crv")?.stringEquals(want.crv) == true,
              let xText = jwk.member("x")?.stringValue, let x = Base64URL.decode(xText), x.count == want.size else {
            throw .jwk
        }
        var y: [UInt8] = []
        switch algorithm {
        case .edDSA:
            // RFC 8037 §2: an OKP key has no `y`.
            guard jwk.member("y") == nil else { throw .jwk }
        case .es256, .es384:
            guard let yText = jwk.member("y")?.stringValue, let decoded = Base64URL.decode(yText), decoded.count == want.size else {
                throw .jwk
            }
            y = decoded
        }
        // A device signs every proof with the same key: the key made from these exact coordinates before is reused (its
        // point was checked then). Making it again cost ~1,150,000 instructions per proof under callgrind (d2i_PUBKEY
        // goes through OpenSSL 3's decoder machinery), the P-256 verification itself ~850,000.
        let identity = [UInt8(ascii: algorithm == .edDSA ? "O" : algorithm == .es256 ? "2" : "3")] + x + y
        if let known = Self.known.withLock({ $0[identity] }) {
            key = known.key
            self.algorithm = algorithm
            thumbprint = known.thumbprint
            return
        }
        let parsed: OpaquePointer?
        let canonical: String
        switch algorithm {
        case .edDSA:
            parsed = x.withUnsafeBufferPointer { EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count) }
            canonical = "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"\(Base64URL.encode(x))\"}"
        case .es256, .es384:
            let der = (algorithm == .es256 ? ES256PublicKey.spkiPrefix : Self.p384Prefix) + [0x04] + x + y
            // d2i_PUBKEY decodes the point with EC_POINT_oct2point, which refuses a point not on the curve.
            parsed = der.withUnsafeBufferPointer { buffer in
                var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_PUBKEY(nil, &cursor, buffer.count)
            }
            canonical = "{\"crv\":\"\(want.crv)\",\"kty\":\"EC\",\"x\":\"\(Base64URL.encode(x))\",\"y\":\"\(Base64URL.encode(y))\"}"
        }
        guard let parsed else { ERR_clear_error(); throw .jwk }
        key = EVPKey(taking: parsed)
        self.algorithm = algorithm
        // RFC 7638 §3.2: the required members only, in lexicographic order, no whitespace.
        thumbprint = Base64URL.encode(SHA256Digest.hash(Array(canonical.utf8)))
        let made = (key: key, thumbprint: thumbprint)
        Self.known.withLock { known in
            // Bounded: a client sending a new key per proof only empties it now and then (each miss costs what every
            // proof cost before).
            if known.count >= Self.knownLimit { known.removeAll(keepingCapacity: true) }
            known[identity] = made
        }
    }

    /// Keys made from `jwk` headers, by algorithm and coordinates (public values; immutable keys, shared between
    /// threads for verification). At most `knownLimit`.
    private static let known = Mutex<[[UInt8]: (key: EVPKey, thumbprint: String)]>([:])
    static let knownLimit = 4096

    /// JWK members that only a private key has (RFC 7518 §6.2.2, §6.3.2; RFC 8037 §2).
    static let privateMembers: Set<String> = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

    /// True when `signature` verifies over `signingInput`: for ES256/ES384 the JOSE form R ‖ S (64 or 96 bytes,
    /// RFC 7518 §3.4), for EdDSA the 64-byte Ed25519 signature (RFC 8037 §3.1). Thread-safe.
    public func verify(signingInput: UnsafeRawBufferPointer, signature: [UInt8]) -> Bool {
        signature.withUnsafeBytes { verify(signingInput: signingInput, signature: $0) }
    }

    /// `verify(signingInput:signature:)` with the signature's bytes in place.
    func verify(signingInput: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) -> Bool {
        switch algorithm {
        case .edDSA:
            // Ed25519 hashes inside the signature scheme: only the one-shot EVP_DigestVerify does it.
            guard signature.count == 64, let context = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(context) }
            guard EVP_DigestVerifyInit(context, nil, nil, nil, key.pointer) == 1 else { ERR_clear_error(); return false }
            let result = EVP_DigestVerify(context, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count,
                                          signingInput.baseAddress?.assumingMemoryBound(to: UInt8.self), signingInput.count)
            ERR_clear_error()
            return result == 1
        case .es256, .es384:
            return verifyECDSA(signingInput: signingInput, signature: signature)
        }
    }

    /// ES256 / ES384 (RFC 7518 §3.4): the signing input hashed (`ecdsaDigest`), R ‖ S turned into DER, and one
    /// `EVP_PKEY_verify` on a context kept with the key (`EVPKey.takeECDSAContext`): the same verification
    /// EVP_DigestVerify makes (ECDSA_verify of the DER over the digest), without setting a context up per proof.
    private func verifyECDSA(signingInput: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) -> Bool {
        let size = algorithm.curve.size
        guard signature.count == 2 * size else { return false }
        // The DER form in a stack buffer (at most 104 bytes for P-384): no ECDSA_SIG, no BIGNUMs, no allocation.
        var der: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)
            = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let derCount = withUnsafeMutableBytes(of: &der) { out in
            Self.writeDERSignature(fromJOSE: signature, into: out)
        }
        guard let derCount else { return false }
        let digestAlgorithm = algorithm == .es256 ? EVP_sha256() : EVP_sha384()
        guard let ctx = key.takeECDSAContext(digest: digestAlgorithm) else { return false }
        // The digest's length is the coordinates' (SHA-256 for P-256, SHA-384 for P-384): up to 48 bytes.
        var digest: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
        let result = withUnsafeMutableBytes(of: &digest) { digest -> Int32 in
            guard let out = digest.baseAddress?.assumingMemoryBound(to: UInt8.self),
                  Self.ecdsaDigest(signingInput, size: size, into: out) else { return 0 }
            return withUnsafeBytes(of: &der) {
                EVP_PKEY_verify(ctx, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), derCount, out, size)
            }
        }
        if result == 1 {
            key.returnECDSAContext(ctx)
        } else {
            // Not kept: a context that saw a failure starts no later verification.
            ERR_clear_error()
            EVP_PKEY_CTX_free(ctx)
        }
        return result == 1
    }

    /// The hash half of ES256 (SHA-256) or ES384 (SHA-384, `size` 48) of `input` into `size` bytes at `out`. A
    /// function of its own, never inlined, so that profiles can add it to the ECDSA operation (Benchmarks/callgrind.sh
    /// counts "one P-256 verify" as this plus EVP_PKEY_verify, as EVP_DigestVerify did both).
    @inline(never)
    static func ecdsaDigest(_ input: UnsafeRawBufferPointer, size: Int, into out: UnsafeMutablePointer<UInt8>) -> Bool {
        if size == 32 { return COpenSSL_sha256(input.baseAddress, input.count, out) == 1 }
        var length: UInt32 = 0
        return EVP_Digest(input.baseAddress, input.count, out, &length, EVP_sha384(), nil) == 1 && length == 48
    }

    /// The longest DER `ECDSA-Sig-Value` `writeDERSignature` writes: P-384's, two 49-byte INTEGERs (48 bytes and a
    /// leading zero) with their tags and lengths, in a SEQUENCE.
    static let maxDERSignatureLength = 2 + 2 * (2 + 49)

    /// R ‖ S (two big-endian unsigned integers of `raw.count / 2` bytes each, at most 48) → the DER
    /// `ECDSA-Sig-Value` (RFC 3279 §2.2.3, X.690 §8.3): `SEQUENCE { INTEGER r, INTEGER s }`, each INTEGER in its
    /// shortest two's-complement form (leading zero bytes dropped, down to one byte for zero; one 0x00 put back in
    /// front when the first remaining byte has its high bit set, else it would read as negative). Every length fits in
    /// one byte (the whole is at most `maxDERSignatureLength` = 104 < 128). Returns the bytes written at the start of
    /// `out`, nil when `raw` has an odd or too large length or `out` is too small. The same bytes OpenSSL's
    /// `i2d_ECDSA_SIG` writes for these r and s, which `ECDSA_verify` insists on (it re-encodes and compares).
    static func writeDERSignature(fromJOSE raw: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int? {
        let size = raw.count / 2
        guard raw.count == 2 * size, size >= 1, size <= 48, out.count >= 2 + 2 * (2 + size + 1) else { return nil }
        var at = 2
        for half in 0..<2 {
            let end = (half + 1) * size
            var first = half * size
            while first < end - 1 && raw[first] == 0 { first += 1 }
            let pad = raw[first] & 0x80 != 0 ? 1 : 0
            out[at] = 0x02
            out[at + 1] = UInt8(end - first + pad)
            at += 2
            if pad == 1 { out[at] = 0; at += 1 }
            for i in first..<end { out[at] = raw[i]; at += 1 }
        }
        out[0] = 0x30
        out[1] = UInt8(at - 2)
        return at
    }
}
