@testable import Gateway
@testable import GatewayConfig

/// The smallest valid configuration and a loader, shared by the config suites; tests put the part they exercise
/// before or after `minimal`.
enum ConfigFixture {
    static let minimal = """
    app_check:
      project_number: "123456789012"
    upstreams:
      api:
        url: http://127.0.0.1:3000
    routes:
      - name: all
        prefix: /
        upstream: api
    """

    static func load(_ yaml: String, environment: [String: String] = [:], cores: Int = 2) -> Result<Settings, ConfigErrors> {
        ConfigLoader.load(yaml: yaml, path: "gw.yaml", environment: environment, cores: cores)
    }

    /// Every error as `LINE:COLUMN: message`, or nothing when the configuration loads.
    static func messages(_ yaml: String) -> [String] {
        if case let .failure(errors) = load(yaml) { return errors.errors.map { "\($0.line):\($0.column): \($0.message)" } }
        return []
    }
}
