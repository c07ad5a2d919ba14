import Gateway
import GatewayConfig

/// Loads a config file or throws its errors (for tests that reload a running server).
public enum ConfigLoaderBridge {
    public static func load(_ path: String) throws -> Settings {
        switch ConfigLoader.load(path: path) {
        case .success(let s): return s
        case .failure(let e): throw HarnessError("\(e)")
        }
    }
}
