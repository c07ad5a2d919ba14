import AndroidAttestation
import Foundation
import GatewayConfig

/// What the issuer needs for the apps with `android:` (SPEC §10 "Android Key Attestation"): a verifier per app
/// (Google's roots or the app's `root_ca_file`), its policy, and the status list of its `revocation_url` (one
/// cache per URL, shared by the apps that name it).
final class AndroidKeyApps: Sendable {
    struct App: Sendable {
        let verifier: AndroidAttestationVerifier
        let policy: AndroidAttestationPolicy
        let statusList: AndroidStatusListCache
    }

    /// `AttestedKey.environment` of an Android key, which keeps it apart from App Attest keys in the shared store.
    static let environment = "android_key"
    /// Largest certificate accepted in `certificate_chain`, decoded (real ones are 0.5–2 KB).
    static let maxCertificateBytes = 16 * 1024

    private let apps: [String: App]

    /// Throws when an app's `root_ca_file` cannot be read or holds no certificate.
    init(settings: IssuerSettings) throws {
        var caches: [String: AndroidStatusListCache] = [:]
        var apps: [String: App] = [:]
        for app in settings.apps {
            guard let android = app.android else { continue }
            let pem = try android.rootCAFile.map { try String(contentsOfFile: $0, encoding: .utf8) } ?? AndroidRootCA.googlePEM
            let cache = caches[android.revocationURL] ?? AndroidStatusListCache(url: android.revocationURL)
            caches[android.revocationURL] = cache
            apps[app.appId] = App(
                verifier: try AndroidAttestationVerifier(rootsPEM: pem),
                policy: AndroidAttestationPolicy(packageName: android.packageName, signingCertificateDigests: android.signingCertSHA256,
                                                 requireStrongBox: android.requireStrongBox, minimumPatchLevel: android.minPatchLevel),
                statusList: cache)
        }
        self.apps = apps
    }

    subscript(_ appId: String) -> App? { apps[appId] }
}
