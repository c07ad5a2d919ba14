import Testing
@testable import AppCheck

@Suite struct AppCheckVerifierTests {
    private let now = Fixtures.now
    private let iss = "\"https://firebaseappcheck.googleapis.com/\(Fixtures.projectNumber)\""

    private func reason(_ changes: [String: String?] = [:], adding extra: [(String, String)] = [],
                        now: Double = Fixtures.now, policy: AppCheckPolicy = Fixtures.policy, limitedUse: Bool = false) throws -> AppCheckReason? {
        Fixtures.reason(try Fixtures.verify(payloadJSON: Fixtures.claims(changes, adding: extra), now: now, policy: policy, limitedUse: limitedUse))
    }

    private func times(exp: Double, iat: Double) -> [String: String?] { ["exp": "\(exp)", "iat": "\(iat)"] }

    @Test func acceptsAFirebaseToken() throws {
        let token = try Fixtures.token(jti: "abc")
        let claims = try AppCheckVerifier.verify(token: token, keys: try Fixtures.keySet(), policy: Fixtures.policy, now: now).get()
        #expect(claims.appId == Fixtures.appId)
        #expect(claims.jti == "abc")
        #expect(claims.issuedAt == now - 60)
        #expect(claims.expiresAt == now + 3540)
        #expect(claims.audiences == ["projects/\(Fixtures.projectNumber)", "projects/\(Fixtures.projectId)"])
        #expect(claims.replayKey.bytes.count == 32)
        #expect(try reason() == nil)
    }

    /// The eight-bytes-a-step test of an App ID is the byte-by-byte rule (1–1,024 bytes, each 0x21–0x7E) for every
    /// byte value at every position of IDs up to 40 bytes (a Firebase App ID has about 35: whole words, then the last
    /// eight bytes read again in part), and at the length limits.
    @Test func headerSafeAppIdsByteForByte() {
        func reference(_ bytes: [UInt8]) -> Bool {
            bytes.count >= 1 && bytes.count <= AppCheckVerifier.maxAppIdLength && bytes.allSatisfy { $0 >= 0x21 && $0 <= 0x7E }
        }
        for length in 1...40 {
            let clean = (0..<length).map { UInt8(0x21 + ($0 * 7) % 94) }
            #expect(clean.withUnsafeBufferPointer { AppCheckVerifier.isHeaderSafeAppId($0) })
            for position in 0..<length {
                for byte in 0...255 {
                    var bytes = clean
                    bytes[position] = UInt8(byte)
                    let safe = bytes.withUnsafeBufferPointer { AppCheckVerifier.isHeaderSafeAppId($0) }
                    if safe != reference(bytes) { Issue.record("length \(length), position \(position), byte \(byte)") }
                }
            }
        }
        #expect(!AppCheckVerifier.isHeaderSafeAppId(""))
        #expect(AppCheckVerifier.isHeaderSafeAppId(String(repeating: "a", count: 1024)))
        #expect(!AppCheckVerifier.isHeaderSafeAppId(String(repeating: "a", count: 1025)))
        #expect(AppCheckVerifier.isHeaderSafeAppId("1:123456789012:ios:abcdef0123456789"))
        #expect(!AppCheckVerifier.isHeaderSafeAppId("1:123456789012:ios:abcdef012345678é"))
    }

    @Test func signatureStage() throws {
        let keys = try Fixtures.keySet()
        let unknown = try Fixtures.token(kid: "rotated-away")
        #expect(Fixtures.reason(AppCheckVerifier.verify(token: unknown, keys: keys, policy: Fixtures.policy, now: now)) == .unknownKid)
        let parsed = try AppCheckToken.parse(try Fixtures.token()).get()
        #expect(AppCheckVerifier.verifySignature(parsed, keys: keys) == nil)
        // Payload changed after signing.
        var parts = try Fixtures.token().split(separator: ".").map(String.init)
        parts[1] = Base64URL.encode(Array(Fixtures.claims(["sub": "\"other-app\""]).utf8))
        #expect(Fixtures.reason(AppCheckVerifier.verify(token: parts.joined(separator: "."), keys: keys, policy: Fixtures.policy, now: now)) == .badSignature)
        // Empty signature part.
        parts = try Fixtures.token().split(separator: ".").map(String.init)
        #expect(Fixtures.reason(AppCheckVerifier.verify(token: parts[0] + "." + parts[1] + ".", keys: keys, policy: Fixtures.policy, now: now)) == .badSignature)
    }

    @Test func issuerAudienceSubject() throws {
        #expect(try reason(["iss": "\"https://firebaseappcheck.googleapis.com/999\""]) == .wrongIssuer)
        #expect(try reason(["iss": "\"https://firebaseappcheck.googleapis.com/\(Fixtures.projectNumber)/\""]) == .wrongIssuer)
        #expect(try reason(["iss": nil]) == .malformed)
        #expect(try reason(["iss": "7"]) == .malformed)
        #expect(try reason(["aud": "\"projects/\(Fixtures.projectNumber)\""]) == .malformed)   // aud as a string
        #expect(try reason(["aud": nil]) == .malformed)
        #expect(try reason(["aud": "[\"projects/\(Fixtures.projectNumber)\"]"]) == .wrongAudience)  // id configured
        #expect(try reason(["aud": "[\"projects/\(Fixtures.projectNumber)\"]"], policy: AppCheckPolicy(projectNumber: Fixtures.projectNumber)) == nil)
        #expect(try reason(["aud": "[]"]) == .wrongAudience)
        #expect(try reason(["aud": "[\"projects/999\",\"projects/\(Fixtures.projectId)\"]"]) == .wrongAudience)
        #expect(try reason(["aud": "[\"projects/\(Fixtures.projectNumber)\",\"projects/\(Fixtures.projectId)\",5]"]) == .malformed)
        #expect(try reason(["aud": "[\"projects/\(Fixtures.projectNumber)\",5]"]) == .wrongAudience)  // containment comes first
        #expect(try reason(["sub": "12345"]) == .malformed)  // numeric sub
        #expect(try reason(["sub": "\"\""]) == .malformed)
        #expect(try reason(["sub": nil]) == .malformed)
        // docs/behaviour.md: sub is copied into X-AppCheck-App-Id, so it must be 1–1,024 characters 0x21–0x7E.
        #expect(try reason(["sub": "\"1:1:ios:a\\r\\nGET /smuggled HTTP/1.1\""]) == .malformed)  // CRLF
        #expect(try reason(["sub": "\"1:1:ios:a\\u0000b\""]) == .malformed)  // NUL
        #expect(try reason(["sub": "\"1:1:ios:a b\""]) == .malformed)  // space
        #expect(try reason(["sub": "\"1:1:ios:a\\tb\""]) == .malformed)  // tab
        #expect(try reason(["sub": "\"1:1:ios:\u{7F}\""]) == .malformed)  // DEL
        #expect(try reason(["sub": "\"1:1:ios:äöü\""]) == .malformed)  // non-ASCII
        #expect(try reason(["sub": "\"" + String(repeating: "a", count: 1025) + "\""]) == .malformed)
        #expect(try reason(["sub": "\"" + String(repeating: "a", count: 1024) + "\""]) == nil)
        #expect(try reason(["sub": "\"!~\""]) == nil)  // both ends of the range
        let allowList = AppCheckPolicy(projectNumber: Fixtures.projectNumber, projectId: Fixtures.projectId, appIds: ["1:1:ios:other"])
        #expect(try reason(policy: allowList) == .appNotAllowed)
        let allowed = AppCheckPolicy(projectNumber: Fixtures.projectNumber, projectId: Fixtures.projectId, appIds: ["1:1:ios:other", Fixtures.appId])
        #expect(try reason(policy: allowed) == nil)
    }

    @Test func timeClaimTypes() throws {
        #expect(try reason(["exp": "\"\(Int(now) + 100)\""]) == .malformed)  // exp as string
        #expect(try reason(["iat": "\"\(Int(now))\""]) == .malformed)
        #expect(try reason(["exp": nil]) == .malformed)
        #expect(try reason(["iat": nil]) == .malformed)
        #expect(try reason(["exp": "null"]) == .malformed)
        #expect(try reason(times(exp: now + 100.5, iat: now - 0.25)) == nil)  // NumericDate may be fractional
    }

    @Test func clockSkewBoundaries() throws {
        // now < exp + skew: equality is expired.
        #expect(try reason(times(exp: now - 10, iat: now - 100)) == .expired)
        #expect(try reason(times(exp: now - 9, iat: now - 100)) == nil)
        #expect(try reason(times(exp: now - 10.5, iat: now - 100)) == .expired)
        // iat <= now + skew: equality passes.
        #expect(try reason(times(exp: now + 100, iat: now + 10)) == nil)
        #expect(try reason(times(exp: now + 100, iat: now + 11)) == .issuedInFuture)
        let strict = AppCheckPolicy(projectNumber: Fixtures.projectNumber, projectId: Fixtures.projectId, clockSkew: 0)
        #expect(try reason(times(exp: now, iat: now - 100), policy: strict) == .expired)
        #expect(try reason(times(exp: now + 100, iat: now + 1), policy: strict) == .issuedInFuture)
    }

    @Test func lifetimeLimit() throws {
        let week = 7.0 * 24 * 3600
        #expect(try reason(times(exp: now + 100, iat: now + 100 - week)) == nil)
        #expect(try reason(times(exp: now + 101, iat: now + 100 - week)) == .lifetimeTooLong)
    }

    @Test func notBeforeAndJti() throws {
        #expect(try reason(adding: [("nbf", "\(Int(now) + 60)")]) == .issuedInFuture)  // nbf in the future
        #expect(try reason(adding: [("nbf", "\(Int(now) + 10)")]) == nil)
        #expect(try reason(adding: [("nbf", "\(Int(now) + 11)")]) == .issuedInFuture)
        #expect(try reason(adding: [("nbf", "\"soon\"")]) == .malformed)
        #expect(try reason(adding: [("jti", "\"\"")]) == .malformed)
        #expect(try reason(adding: [("jti", "42")]) == .malformed)
        #expect(try reason(adding: [("jti", "\"j\"")]) == nil)
    }

    /// docs/behaviour.md: first failure wins, in the documented order.
    @Test func firstFailureWins() throws {
        let week = 7.0 * 24 * 3600
        #expect(try reason(["iss": "\"x\"", "aud": "[]", "sub": "1"]) == .wrongIssuer)
        #expect(try reason(["aud": "[]", "sub": "1"]) == .wrongAudience)
        #expect(try reason(["sub": "1", "exp": "\"x\""]) == .malformed)
        #expect(try reason(["exp": "\(now - 100)", "iat": "\(now + 100)"]) == .expired)
        #expect(try reason(["exp": "\(now + 2 * week)", "iat": "\(now + 100)"]) == .issuedInFuture)
        #expect(try reason(["exp": "\(now + 2 * week)", "iat": "\(now - 100)"], adding: [("nbf", "\(now + 100)")]) == .lifetimeTooLong)
        #expect(try reason(adding: [("nbf", "\(now + 100)"), ("jti", "\"\"")]) == .issuedInFuture)
        #expect(try reason(["aud": "[\"projects/\(Fixtures.projectNumber)\",\"projects/\(Fixtures.projectId)\",1]"], adding: [("jti", "\"\"")]) == .malformed)
        #expect(try reason(["exp": "\(now - 100)"], limitedUse: true) == .expired)
    }

    @Test func limitedUse() throws {
        #expect(try reason(limitedUse: true) == .limitedUseRequired)  // one-hour token
        #expect(try reason(times(exp: now + 240, iat: now - 60), limitedUse: true) == nil)   // exactly 300 s
        #expect(try reason(times(exp: now + 241, iat: now - 60), limitedUse: true) == .limitedUseRequired)
        let claims = try Fixtures.verify(payloadJSON: Fixtures.claims(times(exp: now + 240, iat: now - 60))).get()
        #expect(AppCheckVerifier.checkLimitedUse(claims, policy: Fixtures.policy) == nil)
        let strict = AppCheckPolicy(projectNumber: Fixtures.projectNumber, limitedUseMaxTTL: 60)
        #expect(AppCheckVerifier.checkLimitedUse(claims, policy: strict) == .limitedUseRequired)
    }

    @Test func replayKeys() throws {
        let keys = try Fixtures.keySet()
        func replayKey(_ token: String) throws -> [UInt8] {
            try AppCheckVerifier.verify(token: token, keys: keys, policy: Fixtures.policy, now: now).get().replayKey.bytes
        }
        // With jti: SHA-256(sub + "\n" + jti); the same (sub, jti) in a differently encoded token is the same key.
        let a = try Fixtures.token(jti: "J1")
        let aAgain = try Fixtures.token(issuedAt: Int(now) - 30, jti: "J1")
        #expect(a != aAgain)
        #expect(try replayKey(a) == replayKey(aAgain))
        #expect(try replayKey(a) == SHA256Digest.hash(Array("\(Fixtures.appId)\nJ1".utf8)))
        #expect(try replayKey(a) != replayKey(try Fixtures.token(jti: "J2")))
        #expect(try replayKey(a) != replayKey(try Fixtures.token(jti: "J1", appId: "1:1:ios:other")))
        // Without jti: SHA-256(signing input + "." + raw signature bytes), not the token text.
        let b = try Fixtures.token()
        let parts = b.split(separator: ".").map(String.init)
        let expected = SHA256Digest.hash(Array((parts[0] + "." + parts[1] + ".").utf8) + (Base64URL.decode(parts[2]) ?? []))
        #expect(try replayKey(b) == expected)
        #expect(try replayKey(b) != AppCheckVerifier.tokenHash(b))
        #expect(try replayKey(b) != replayKey(try Fixtures.token(issuedAt: Int(now) - 61)))
        // Read from sub and jti (the replay key is computed when read): the same on every read.
        let verifiedA = try AppCheckVerifier.verify(token: a, keys: keys, policy: Fixtures.policy, now: now).get()
        #expect(verifiedA.replayKey == verifiedA.replayKey)
        #expect(verifiedA.jti == "J1" && verifiedA.appId == Fixtures.appId)
    }

    @Test func cachedClaimsStillRunTimeChecks() throws {
        let parsed = try AppCheckToken.parse(try Fixtures.token(ttl: 120)).get()
        #expect(AppCheckVerifier.verifySignature(parsed, keys: try Fixtures.keySet()) == nil)
        let cached = parsed.claims
        #expect((try? AppCheckVerifier.checkClaims(cached, policy: Fixtures.policy, now: now).get()) != nil)
        #expect(Fixtures.reason(AppCheckVerifier.checkClaims(cached, policy: Fixtures.policy, now: now + 70)) == .expired)
    }

    @Test func tokenHashAndFingerprint() throws {
        let token = try Fixtures.token()
        #expect(AppCheckVerifier.tokenHash(token) == SHA256Digest.hash(Array(token.utf8)))
        #expect(AppCheckVerifier.tokenHash(token).count == 32)
        #expect(SHA256Digest.hex(SHA256Digest.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let fingerprint = AppCheckVerifier.logFingerprint(Array(token.utf8))
        #expect(fingerprint.count == 16)
        #expect(SHA256Digest.hex(AppCheckVerifier.tokenHash(token)).hasPrefix(fingerprint))
    }

    @Test func reasonNamesMatchSpec() {
        #expect(AppCheckReason.allCases.map(\.rawValue) == [
            "missing", "duplicate_header", "too_large", "malformed", "unsupported_algorithm", "wrong_type",
            "unknown_kid", "bad_signature", "wrong_issuer", "wrong_audience", "app_not_allowed", "expired",
            "issued_in_future", "lifetime_too_long", "provider_not_allowed", "risk_exceeded", "risk_unknown",
            "limited_use_required", "reused"])
    }

    @Test func mintedTokenShape() throws {
        let token = try Fixtures.token(jti: "j")
        let parts = token.split(separator: ".").map(String.init)
        #expect(String(decoding: Base64URL.decode(parts[0]) ?? [], as: UTF8.self) == #"{"alg":"RS256","kid":"kid-main","typ":"JWT"}"#)
        let payload = String(decoding: Base64URL.decode(parts[1]) ?? [], as: UTF8.self)
        #expect(payload == #"{"iss":"https://firebaseappcheck.googleapis.com/123456789012","sub":"1:123456789012:ios:abcdef0123456789","aud":["projects/123456789012","projects/my-project"],"exp":1735693140,"iat":1735689540,"jti":"j"}"#)
        let noId = try Fixtures.token(projectId: nil)
        let noIdPayload = try StrictJSON.parse(Base64URL.decode(noId.split(separator: ".").map(String.init)[1]) ?? [])
        #expect(noIdPayload.member("aud") == .array([.string("projects/123456789012")]))
        #expect(noIdPayload.member("jti") == nil)
    }
}
