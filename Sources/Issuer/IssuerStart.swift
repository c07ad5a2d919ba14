import GatewayConfig
import JSONLog
import KeySets
import ReplayStores

/// Why the issuer could not start (a key file changed since `check-config`, the state store cannot be opened).
/// One readable line.
public struct IssuerStartError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension IssuerService {
    /// The service a server runs, from validated settings: signing keys read from their files, state opened
    /// as `issuer.state` says.
    package static func start(settings: IssuerSettings, projectNumber: String, projectId: String?, jwks: JWKSSettings,
                      clockSkew: Double, logSink: LogSink) throws -> IssuerService {
        let keys = try IssuerKeys.load(paths: settings.signingKeyPaths)
        let state: IssuerState
        switch settings.state.store {
        case .memory:
            state = MemoryIssuerState()
        case .sqlite:
            do { state = try SQLiteIssuerState(path: settings.state.sqlitePath) } catch {
                throw IssuerStartError("issuer.state: cannot open \(settings.state.sqlitePath): \(error)")
            }
        case .redis:
            do {
                state = try RedisIssuerState(url: settings.state.redisURL, keyPrefix: settings.state.keyPrefix, logSink: logSink)
            } catch {
                throw IssuerStartError("\(error)")
            }
        }
        let service = try IssuerService(settings: settings, projectNumber: projectNumber, projectId: projectId, keys: keys,
                                        state: state, jwks: jwks, clockSkew: clockSkew, log: logSink)
        service.start()
        return service
    }
}
