// Where the gateway's issuer answers, and the names AppCheckCore needs. Not compiled by this project (see README.md).
import FirebaseCore

enum GatewayIssuer {
    /// `https://<your host><issuer.base_path>/v1`, no trailing slash. CHANGE.
    static let baseURL = "https://api.example.com/appcheck/v1"

    /// AppCheckCore's default base URL (GACAppCheckAPIService.m:85), which a request hook rewrites for DeviceCheck.
    static let googleBaseURL = "https://firebaseappcheck.googleapis.com/v1"

    /// `projects/{project ID}/apps/{App ID}`, the resource name FirebaseAppCheck builds (FIRApp+AppCheck.m:22-23).
    /// The gateway takes the project ID here only when `app_check.project_id` is set to it.
    static func resourceName(for app: FirebaseApp) -> String? {
        guard let projectID = app.options.projectID else { return nil }
        return "projects/\(projectID)/apps/\(app.options.googleAppID)"
    }

    /// Storage (keychain) name of the provider's App Attest key and artifact. Not `app.name` alone: a key attested
    /// by Google's server under FirebaseAppCheck's own provider would be unknown to the gateway, and AppCheckCore
    /// does not reset a key refused on assertion (README.md, "How the SDK reacts").
    static func serviceName(for app: FirebaseApp) -> String { "\(app.name).appcheck-gateway" }
}
