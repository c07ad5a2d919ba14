import Foundation
import Testing
@testable import AppCheck

/// Keys, clocks and helpers shared by the AppCheck tests. Keys are generated once per test run.
enum Fixtures {
    static let projectNumber = "123456789012"
    static let projectId = "my-project"
    static let appId = "1:123456789012:ios:abcdef0123456789"
    static let kid = "kid-main"
    /// A fixed clock: 2025-01-01T00:00:00Z.
    static let now: Double = 1_735_689_600

    static let signingKey: RSAPrivateKey? = try? RSAPrivateKey.generate(bits: 2048)
    static let otherKey: RSAPrivateKey? = try? RSAPrivateKey.generate(bits: 2048)

    static func key() throws -> RSAPrivateKey { try #require(signingKey) }

    static func keySet() throws -> JWKSet {
        let key = try key()
        return try JWKSet.parse(Array(JWKSet.document(for: [(kid, try key.publicKey)]).utf8))
    }

    static let policy = AppCheckPolicy(projectNumber: projectNumber, projectId: projectId)

    /// A well-formed token from `signingKey`, issued at `now - 60` for one hour unless told otherwise.
    static func token(issuedAt: Int = Int(now) - 60, ttl: Int = 3600, jti: String? = nil, appId: String = appId,
                      kid: String = kid, projectId: String? = projectId) throws -> String {
        try TokenMinter.mint(key: key(), kid: kid, projectNumber: projectNumber, projectId: projectId,
                             appId: appId, issuedAt: issuedAt, ttl: ttl, jti: jti)
    }

    static let goodHeader = #"{"alg":"RS256","kid":"kid-main","typ":"JWT"}"#

    /// A payload with the standard claims; `extra` members are appended, `drop` members removed, `replace` swapped.
    static func payload(_ members: [(String, String)]) -> String {
        "{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

    static var standardClaims: [(String, String)] {
        [("iss", "\"https://firebaseappcheck.googleapis.com/\(projectNumber)\""),
         ("sub", "\"\(appId)\""),
         ("aud", "[\"projects/\(projectNumber)\",\"projects/\(projectId)\"]"),
         ("exp", "\(Int(now) + 3540)"),
         ("iat", "\(Int(now) - 60)")]
    }

    /// Standard claims with `name` replaced by `value` (JSON text), or removed when `value` is nil.
    static func claims(_ changes: [String: String?] = [:], adding extra: [(String, String)] = []) -> String {
        var members: [(String, String)] = []
        for (name, value) in standardClaims {
            if let change = changes[name] {
                if let change { members.append((name, change)) }
            } else {
                members.append((name, value))
            }
        }
        return payload(members + extra)
    }

    /// Signs `payloadJSON` under the good header and runs the whole pipeline.
    static func verify(payloadJSON: String, header: String = goodHeader, now: Double = now,
                       policy: AppCheckPolicy = policy, limitedUse: Bool = false) throws -> Result<VerifiedClaims, AppCheckReason> {
        let token = try TokenMinter.mintRaw(headerJSON: header, payloadJSON: payloadJSON, key: key())
        return AppCheckVerifier.verify(token: token, keys: try keySet(), policy: policy, now: now, limitedUse: limitedUse)
    }

    /// `Tests/TestData/wycheproof/<name>` (vectors copied into the repository with their licence), found relative
    /// to this source file so the tests never read outside the repository; loaded as JSON; a missing file fails
    /// the test.
    static func wycheproof(_ name: String, filePath: String = #filePath) throws -> [String: Any] {
        let testsDirectory = URL(fileURLWithPath: filePath).deletingLastPathComponent().deletingLastPathComponent()
        let url = testsDirectory.appendingPathComponent("TestData/wycheproof/\(name)")
        let data = try Data(contentsOf: url)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], "\(url.path) is not a JSON object")
    }

    static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var high: UInt8? = nil
        for char in text.utf8 {
            let value: UInt8
            switch char {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = char - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = char - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = char - UInt8(ascii: "A") + 10
            default: continue
            }
            if let h = high { out.append(h << 4 | value); high = nil } else { high = value }
        }
        return out
    }

    static func reason(_ result: Result<VerifiedClaims, AppCheckReason>) -> AppCheckReason? {
        if case .failure(let reason) = result { return reason }
        return nil
    }

    static func reason(_ result: Result<ParsedToken, AppCheckReason>) -> AppCheckReason? {
        if case .failure(let reason) = result { return reason }
        return nil
    }
}
