/// The checks of RFC 9449 §4.3 on one DPoP proof, in the order SPEC §4.4 lists them; the first failure is the rule
/// reported: `malformed`, `typ`, `alg`, `jwk` (`DPoPProof.parse`), then `thumbprint`, `signature`, `htm`, `htu`,
/// `iat`, `ath`, `jti`. Single use of the `jti` is the caller's (the replay store), with `DPoPVerifiedProof.replayKey`.
///
/// Pure: the time is an argument (`now`, seconds since the Unix epoch); no I/O, no logging, no global state.
public enum DPoPVerifier {
    /// The longest `jti` accepted, in characters (Unicode scalars).
    public static let maxJTILength = 128

    public static func verify<Bytes: Collection>(_ proof: Bytes, request: DPoPRequest, now: Double)
        -> Result<DPoPVerifiedProof, DPoPRule> where Bytes.Element == UInt8 {
        let parsed: DPoPProof
        do { parsed = try DPoPProof.parse(proof) } catch { return .failure(error) }
        return verify(parsed, request: request, now: now)
    }

    /// The checks after the header's, on a parsed proof.
    public static func verify(_ proof: DPoPProof, request: DPoPRequest, now: Double) -> Result<DPoPVerifiedProof, DPoPRule> {
        if let expected = request.thumbprint, !utf8Equal(expected, proof.key.thumbprint) { return .failure(.thumbprint) }
        guard proof.signatureVerifies else { return .failure(.signature) }
        let claims = Claims(proof.payload)
        guard let htm = claims.htm?.stringValue, utf8Equal(htm, request.method) else { return .failure(.htm) }
        guard let htu = claims.htu?.stringValue, request.matches(htu: htu) else { return .failure(.htu) }
        guard let iat = claims.iat?.numberValue,
              iat >= now - request.maxAge - request.clockSkew, iat <= now + request.clockSkew else {
            return .failure(.iat)
        }
        // A cached token's `ath` was computed when it was cached (`accessTokenHash`); else the token is hashed here.
        if let expected = request.accessTokenHash ?? request.accessToken.map({ DPoPRequest.ath(of: $0) }) {
            guard let ath = claims.ath?.stringValue, utf8Equal(ath, expected) else { return .failure(.ath) }
        }
        guard let jti = claims.jti?.stringValue, !jti.isEmpty, jtiFits(jti) else { return .failure(.jti) }
        return .success(DPoPVerifiedProof(thumbprint: proof.key.thumbprint, jti: jti, issuedAt: iat,
                                          rememberUntil: iat + request.maxAge + request.clockSkew))
    }
}

extension DPoPVerifier {
    /// The five claims the checks read, taken from the payload's members in one pass (the first of each name, as
    /// `JSONValue.member` would give; `StrictJSON` refuses duplicate names anyway). Five `member` look-ups, each a scan
    /// comparing names, cost ~1,600 instructions per proof.
    struct Claims {
        var htm: JSONValue?, htu: JSONValue?, iat: JSONValue?, ath: JSONValue?, jti: JSONValue?

        init(_ payload: JSONValue) {
            guard let members = payload.objectMembers else { return }
            for (key, value) in members {
                var key = key
                key.withUTF8 { name in
                    guard name.count == 3 else { return }
                    switch (name[0], name[1], name[2]) {
                    case (0x68, 0x74, 0x6D): if htm == nil { htm = value }  // htm
                    case (0x68, 0x74, 0x75): if htu == nil { htu = value }  // htu
                    case (0x69, 0x61, 0x74): if iat == nil { iat = value }  // iat
                    case (0x61, 0x74, 0x68): if ath == nil { ath = value }  // ath
                    case (0x6A, 0x74, 0x69): if jti == nil { jti = value }  // jti
                    default: break
                    }
                }
            }
        }
    }

    /// At most `maxJTILength` Unicode scalars: a `jti` of at most that many UTF-8 bytes has no more scalars than
    /// bytes, so only a longer one is counted (counting every one cost ~600 instructions per proof).
    static func jtiFits(_ jti: String) -> Bool {
        jti.utf8.count <= maxJTILength || jti.unicodeScalars.count <= maxJTILength
    }
}

/// A proof that passed every check of `DPoPVerifier` except single use.
public struct DPoPVerifiedProof: Sendable, Equatable {
    /// The RFC 7638 thumbprint of the proof's key: the `cnf.jkt` a token minted for it carries.
    public let thumbprint: String
    public let jti: String
    public let issuedAt: Double
    /// After this instant the proof is refused by its `iat` anyway: the replay store may forget its `jti` then.
    public let rememberUntil: Double

    /// The replay-store key of the proof's single use: SHA-256(0x00 ‖ "dpop\n" ‖ thumbprint ‖ "\n" ‖ jti). Its own
    /// key domain: a token's key hashes a `sub` (printable ASCII) or a signing input (base64url), neither of which
    /// can start with a NUL byte. Per key, so one client's `jti` cannot burn another's.
    /// The material is laid out in a temporary buffer (on the stack at these sizes: a 43-byte thumbprint, a `jti` of at
    /// most 512 bytes) and hashed once; building it from arrays cost ~7,700 instructions per proof.
    public var replayKey: SHA256Digest.Value {
        var thumbprint = thumbprint, jti = jti
        return thumbprint.withUTF8 { t in
            jti.withUTF8 { j in
                let count = 6 + t.count + 1 + j.count
                return withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { buffer in
                    buffer.storeBytes(of: 0, toByteOffset: 0, as: UInt8.self)
                    var at = 1
                    for byte in "dpop\n".utf8 { buffer.storeBytes(of: byte, toByteOffset: at, as: UInt8.self); at += 1 }
                    UnsafeMutableRawBufferPointer(rebasing: buffer[at..<(at + t.count)]).copyMemory(from: UnsafeRawBufferPointer(t))
                    at += t.count
                    buffer.storeBytes(of: UInt8(ascii: "\n"), toByteOffset: at, as: UInt8.self)
                    at += 1
                    UnsafeMutableRawBufferPointer(rebasing: buffer[at..<(at + j.count)]).copyMemory(from: UnsafeRawBufferPointer(j))
                    return SHA256Digest.value(UnsafeRawBufferPointer(buffer))
                }
            }
        }
    }
}
