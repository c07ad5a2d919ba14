// FirebaseAppCheck's provider protocol over any AppCheckCore provider. Not compiled by this project (see README.md).
import AppCheckCore
import FirebaseAppCheck

final class GatewayProvider: NSObject, AppCheckProvider {
    private let core: AppCheckCoreProvider

    init(core: AppCheckCoreProvider) {
        self.core = core
    }

    func getToken(completion handler: @escaping (AppCheckToken?, Error?) -> Void) {
        core.getToken { token, error in
            handler(token.map { AppCheckToken(token: $0.token, expirationDate: $0.expirationDate) }, error)
        }
    }

    /// What `AppCheck.appCheck().limitedUseToken()` calls: a token for routes with `replay_protection: true`.
    func getLimitedUseToken(completion handler: @escaping (AppCheckToken?, Error?) -> Void) {
        core.getLimitedUseToken { token, error in
            handler(token.map { AppCheckToken(token: $0.token, expirationDate: $0.expirationDate) }, error)
        }
    }
}
