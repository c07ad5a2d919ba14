import AppCheck
import Foundation

extension KeySetProvider {
    /// Fetches and parses the key set once, blocking (for the `verify` command; never on a loop thread).
    public static func fetchOnce(_ settings: JWKSSettings, timeout: Double = 10, caFile: String? = nil) -> Result<JWKSet, Error> {
        let client = BlockingHTTPClient(timeout: timeout, maxBodyBytes: JWKSet.maxDocumentBytes, caFile: caFile)
        do {
            let response = try client.get(settings.url)
            return .success(try JWKSet.parse(response.body))
        } catch {
            return .failure(error)
        }
    }
}
