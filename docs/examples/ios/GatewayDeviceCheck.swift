// DeviceCheck against the gateway. AppCheckCore's DeviceCheck provider takes no base URL, so a request hook
// rewrites Google's URL to the gateway's: hooks run after the URL is set (GACAppCheckAPIService.m:135-137).
// That is AppCheckCore's behaviour today, not a documented promise: UNTESTED on a device. If a future version
// stops honouring it, requests go to Google with your resource name and fail. Not compiled by this project.
import AppCheckCore
import Foundation

enum GatewayDeviceCheck {
    /// `apiKey`: `FirebaseApp.options.apiKey ?? ""` (the initializer's `APIKey:` is non-null).
    static func provider(serviceName: String, resourceName: String, apiKey: String) -> GatewayProvider {
        let toGateway: (NSMutableURLRequest) -> Void = { request in
            guard let url = request.url?.absoluteString, url.hasPrefix(GatewayIssuer.googleBaseURL) else { return }
            request.url = URL(string: GatewayIssuer.baseURL + url.dropFirst(GatewayIssuer.googleBaseURL.count))
        }
        return GatewayProvider(core: AppCheckCoreDeviceCheckProvider(
            serviceName: serviceName, resourceName: resourceName, apiKey: apiKey, requestHooks: [toGateway]))
    }
}
