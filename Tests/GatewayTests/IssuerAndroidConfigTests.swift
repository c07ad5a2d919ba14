import GatewayConfig
import Testing

/// `issuer.apps[].android` (docs/issuer.md "Android"): the documented shape loads with its values; the errors
/// are rows of ConfigErrorTable+Issuer.swift.
extension IssuerConfigTests {
    @Test func androidLoadsWithItsValues() throws {
        let keys = try KeyFiles()
        let digest = (0..<32).map { String(format: "%02X", $0) }.joined(separator: ":")
        let yaml = issuer(keys, apps: """
            - app_id: "1:123456789012:android:0a1b2c3d4e5f6a7b"
              android:
                package_name: com.example.app
                signing_cert_sha256: ["\(digest)", "\(String(repeating: "ff", count: 32))"]
                require_strongbox: true
                min_patch_level: 2026-01
                root_ca_file: \(keys.path("root.pem"))
                revocation_url: file:///var/lib/appcheck-gateway/status.json
            - app_id: "1:123456789012:android:ffff"
              android:
                package_name: com.example.other
                signing_cert_sha256: ["\(String(repeating: "0", count: 64))"]
        """)
        let settings = try load(yaml).get()
        let apps = try #require(settings.issuer?.apps)
        let android = try #require(apps.first?.android)
        #expect(android.packageName == "com.example.app")
        #expect(android.signingCertSHA256 == [(0..<32).map { UInt8($0) }, [UInt8](repeating: 0xFF, count: 32)])
        #expect(android.requireStrongBox)
        #expect(android.minPatchLevel == 202_601)
        #expect(android.rootCAFile == keys.path("root.pem"))
        #expect(android.revocationURL == "file:///var/lib/appcheck-gateway/status.json")
        #expect(apps.first?.methods == ["generateAndroidKeyChallenge", "exchangeAndroidKeyAttestation", "exchangeAndroidKeyAssertion"])
        let defaults = try #require(apps.last?.android)
        #expect(!defaults.requireStrongBox)
        #expect(defaults.minPatchLevel == nil)
        #expect(defaults.rootCAFile == nil)
        #expect(defaults.revocationURL == "https://android.googleapis.com/attestation/status")
    }
}
