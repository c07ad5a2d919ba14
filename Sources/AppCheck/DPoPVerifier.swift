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
        let claims = proof.claims
        return proof.decoded.withUnsafeBufferPointer { payload -> Result<DPoPVerifiedProof, DPoPRule> in
            let htmMatches = DPoPClaims.withText(claims.htm, in: payload) { htm in
                guard let htm else { return false }
                var method = request.method
                return method.withUTF8 { bytesEqual(htm, $0) }
            }
            guard htmMatches else { return .failure(.htm) }
            guard DPoPClaims.withText(claims.htu, in: payload, { htu in
                guard let htu else { return false }
                return request.matches(htu: htu)
            }) else {
                return .failure(.htu)
            }
            guard let iat = DPoPClaims.number(claims.iat),
                  iat >= now - request.maxAge - request.clockSkew, iat <= now + request.clockSkew else {
                return .failure(.iat)
            }
            // A cached token's `ath` was computed when it was cached (`accessTokenHash`); else the token is hashed here.
            if var expected = request.accessTokenHash ?? request.accessToken.map({ DPoPRequest.ath(of: $0) }) {
                let athMatches = DPoPClaims.withText(claims.ath, in: payload) { ath in
                    guard let ath else { return false }
                    return expected.withUTF8 { bytesEqual(ath, $0) }
                }
                guard athMatches else { return .failure(.ath) }
            }
            let jti: ArraySlice<UInt8>
            switch claims.jti {
            case .plain(let range)?:
                // Printable ASCII: one character per byte. Kept in place in the decoded payload (no String made).
                guard !range.isEmpty, range.count <= maxJTILength else { return .failure(.jti) }
                jti = proof.decoded[range]
            case .json(.string(let text))?:
                guard !text.isEmpty, jtiFits(text) else { return .failure(.jti) }
                jti = Array(text.utf8)[...]
            default:
                return .failure(.jti)
            }
            return .success(DPoPVerifiedProof(thumbprint: proof.key.thumbprint, jtiBytes: jti, issuedAt: iat,
                                              rememberUntil: iat + request.maxAge + request.clockSkew))
        }
    }
}

extension DPoPVerifier {
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
    /// The `jti`'s UTF-8 bytes (a slice of the decoded payload when it was written without escapes: no copy).
    let jtiBytes: ArraySlice<UInt8>
    public let issuedAt: Double
    /// After this instant the proof is refused by its `iat` anyway: the replay store may forget its `jti` then.
    public let rememberUntil: Double

    /// The `jti` claim (valid UTF-8: `StrictJSON`'s rules).
    public var jti: String { String(decoding: jtiBytes, as: UTF8.self) }

    init(thumbprint: String, jtiBytes: ArraySlice<UInt8>, issuedAt: Double, rememberUntil: Double) {
        self.thumbprint = thumbprint; self.jtiBytes = jtiBytes; self.issuedAt = issuedAt; self.rememberUntil = rememberUntil
    }

    init(thumbprint: String, jti: String, issuedAt: Double, rememberUntil: Double) {
        self.init(thumbprint: thumbprint, jtiBytes: Array(jti.utf8)[...], issuedAt: issuedAt, rememberUntil: rememberUntil)
    }

    /// Equal when thumbprint, `jti` bytes and times are.
    public static func == (a: DPoPVerifiedProof, b: DPoPVerifiedProof) -> Bool {
        utf8Equal(a.thumbprint, b.thumbprint) && a.jtiBytes.elementsEqual(b.jtiBytes) && a.issuedAt == b.issuedAt
            && a.rememberUntil == b.rememberUntil
    }

    /// The replay-store key of the proof's single use: SHA-256(0x01 ‖ T ‖ jti), T the 32 bytes of the thumbprint
    /// (base64url-decoded). T has a fixed length, so the material names one (key, `jti`) pair; its first byte is the
    /// domain: a token's key hashes a `sub` (printable ASCII) or a signing input (base64url), neither of which starts
    /// with 0x01 (nor 0x00, the earlier layout below). Per key, so one client's `jti` cannot burn another's. With the
    /// raw thumbprint a `jti` of up to 22 bytes (128 random bits in base64url, as this gateway's issuer makes them)
    /// fits SHA-256's one-block message (55 bytes): one compression per proof instead of two (~2,000 instructions).
    /// A thumbprint that is not 43 base64url characters (none made here) keeps the earlier layout,
    /// SHA-256(0x00 ‖ "dpop\n" ‖ thumbprint ‖ "\n" ‖ jti). The material is laid out on the stack and hashed once.
    public var replayKey: SHA256Digest.Value {
        var thumbprint = thumbprint
        return thumbprint.withUTF8 { t in
            jtiBytes.withUnsafeBufferPointer { j in
                let count = max(33, 6 + t.count + 1) + j.count
                return withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { buffer in
                    guard let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                        return SHA256Digest.value(UnsafeRawBufferPointer(buffer))
                    }
                    var at: Int
                    if t.count == 43, Base64URL.decode(UnsafeRawBufferPointer(t), into: base + 1) == 32 {
                        base[0] = 0x01
                        at = 33
                    } else {
                        base[0] = 0x00
                        at = 1
                        for byte in "dpop\n".utf8 { base[at] = byte; at += 1 }
                        UnsafeMutableRawBufferPointer(rebasing: buffer[at..<(at + t.count)]).copyMemory(from: UnsafeRawBufferPointer(t))
                        at += t.count
                        base[at] = UInt8(ascii: "\n")
                        at += 1
                    }
                    UnsafeMutableRawBufferPointer(rebasing: buffer[at..<(at + j.count)]).copyMemory(from: UnsafeRawBufferPointer(j))
                    return SHA256Digest.value(UnsafeRawBufferPointer(rebasing: buffer[0..<(at + j.count)]))
                }
            }
        }
    }
}
