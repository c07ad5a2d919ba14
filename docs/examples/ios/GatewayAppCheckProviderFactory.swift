// App Attest against the gateway, DeviceCheck where App Attest is missing, the debug provider on the simulator.
// Install before FirebaseApp.configure():
//
//     AppCheck.setAppCheckProviderFactory(GatewayAppCheckProviderFactory())
//
// Not compiled by this project (see README.md).
import AppCheckCore
import DeviceCheck
import FirebaseAppCheck
import FirebaseCore

final class GatewayAppCheckProviderFactory: NSObject, AppCheckProviderFactory {
    func createProvider(with app: FirebaseApp) -> AppCheckProvider? {
        guard let resourceName = GatewayIssuer.resourceName(for: app) else { return nil }
        let serviceName = GatewayIssuer.serviceName(for: app)
        // Sent as X-Goog-Api-Key, which the gateway ignores; the debug and DeviceCheck providers require a non-null
        // key (AppCheckCore 10.18.0 and later, commit 462e3d2), App Attest takes nil too.
        let apiKey = app.options.apiKey ?? ""

        #if targetEnvironment(simulator)
        // The gateway's issuer.apps[].debug_secrets must list the secret; set it in the scheme's environment as
        // AppCheckDebugToken (read first; FIRAAppCheckDebugToken is read when it is not set).
        return GatewayProvider(core: AppCheckCoreDebugProvider(
            serviceName: serviceName, resourceName: resourceName, baseURL: GatewayIssuer.baseURL,
            apiKey: apiKey, requestHooks: nil))
        #else
        if #available(iOS 14.0, *), DCAppAttestService.shared.isSupported {
            // baseURL: AppCheckCore 10.18.0 and later.
            return GatewayProvider(core: AppCheckCoreAppAttestProvider(
                serviceName: serviceName, resourceName: resourceName, baseURL: GatewayIssuer.baseURL,
                apiKey: apiKey, keychainAccessGroup: nil, requestHooks: nil))
        }
        // Untested, see GatewayDeviceCheck.swift; return nil instead to send no token from such devices.
        return GatewayDeviceCheck.provider(serviceName: serviceName, resourceName: resourceName, apiKey: apiKey)
        #endif
    }
}
