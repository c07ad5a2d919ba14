import Foundation
@testable import Gateway
@testable import GatewayConfig
import Testing

/// `dashboard:` (docs/configuration.md): defaults, values, and FILE:LINE:COLUMN errors like every other section.
@Suite struct DashboardConfigTests {
    static let tail = ConfigFixture.minimal

    static func load(_ yaml: String) -> Result<Settings, ConfigErrors> { ConfigFixture.load(yaml) }

    @Test func defaultsWhenAbsent() throws {
        let s = try Self.load(Self.tail).get()
        #expect(s.dashboard == DashboardSettings())
        #expect(s.dashboard.minRequests == 1000 && s.dashboard.readyShare == 0.99 && s.dashboard.historyFile.isEmpty)
    }

    @Test func valuesAreRead() throws {
        let s = try Self.load("dashboard:\n  min_requests: 50\n  ready_share: 0.995\n  history_file: /tmp/h.json\n" + Self.tail).get()
        #expect(s.dashboard.minRequests == 50 && s.dashboard.readyShare == 0.995 && s.dashboard.historyFile == "/tmp/h.json")
    }

    @Test(arguments: [
        ("dashboard:\n  min_request: 5\n", 2, 3, "unknown key 'min_request' in dashboard; did you mean 'min_requests'?"),
        ("dashboard:\n  min_requests: -1\n", 2, 17, "dashboard.min_requests must be"),
        ("dashboard:\n  min_requests: lots\n", 2, 17, "expected a whole number"),
        ("dashboard:\n  ready_share: 1.5\n", 2, 16, "dashboard.ready_share must be a number between 0 and 1"),
        ("dashboard:\n  ready_share: 99%\n", 2, 16, "dashboard.ready_share must be a number between 0 and 1"),
        ("dashboard:\n  history_file: /no/such/folder/h.json\n", 2, 17, "folder '/no/such/folder' does not exist"),
        ("dashboard:\n  history_file: /tmp/\n", 2, 17, "must name a file"),
        ("dashboard: 3\n", 1, 12, "dashboard"),
    ])
    func errorsNameFileLineAndColumn(yaml: String, line: Int, column: Int, fragment: String) throws {
        guard case .failure(let errors) = Self.load(yaml + Self.tail) else {
            Issue.record("loaded: \(yaml)")
            return
        }
        #expect(errors.errors.count == 1, "\(errors)")
        let e = try #require(errors.errors.first)
        #expect(e.file == "gw.yaml")
        #expect((e.line, e.column) == (line, column), "\(e)")
        #expect(e.message.contains(fragment), "\(e)")
    }
}
