import Foundation
import Testing
import TestSupport
@testable import Gateway

/// The fraud-risk keys of `issuer.apps[]` (docs/issuer.md "Fraud risk"): values load, each mistake is one
/// FILE:LINE:COLUMN error like the other issuer keys.
@Suite struct IssuerFraudRiskConfigTests {
    let base = IssuerConfigTests()

    /// The full app with `attest` appended under `app_attest:` and `app` appended to the app.
    func yaml(_ keys: IssuerConfigTests.KeyFiles, attest: String = "", app: String = "") -> String {
        var text = IssuerConfigTests.fullApp.replacingOccurrences(
            of: "environments: [production, development]", with: "environments: [production, development]" + attest)
        text += app
        return base.issuer(keys, apps: text)
    }

    /// The 1-based line of the YAML holding `marker`.
    func line(_ yaml: String, _ marker: String) -> Int {
        (yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains(marker) } ?? -1) + 1
    }

    @Test func theKeysLoadWithTheirValues() throws {
        let keys = try IssuerConfigTests.KeyFiles()
        let text = yaml(keys, attest: """

                receipt_root_ca_file: \(keys.path("root.pem"))
                risk: { refresh: 12h, api_url: "http://127.0.0.1:9999" }
        """, app: """

              max_risk_metric: 5
              require_risk_metric: true
              device_check:
                key_id: ABC123DEFG
                private_key: \(keys.path("AuthKey.p8"))
        """)
        let app = try #require(try base.load(text).get().issuer?.apps.first)
        #expect(app.maxRiskMetric == 5 && app.requireRiskMetric)
        #expect(app.appAttest?.receiptRootCAFile == keys.path("root.pem"))
        #expect(app.appAttest?.risk.refresh == 43_200)
        #expect(app.appAttest?.risk.effectiveAPIURL(.production) == "http://127.0.0.1:9999")

        let defaults = try #require(try base.load(yaml(keys)).get().issuer?.apps.first)
        #expect(defaults.maxRiskMetric == 0 && !defaults.requireRiskMetric && defaults.appAttest?.receiptRootCAFile == nil)
        #expect(defaults.appAttest?.risk.refresh == 86_400)
        #expect(defaults.appAttest?.risk.effectiveAPIURL(.production) == "https://data.appattest.apple.com")
        #expect(defaults.appAttest?.risk.effectiveAPIURL(.development) == "https://data-development.appattest.apple.com")
        let off = try #require(try base.load(yaml(keys, attest: "\n        risk: { refresh: 0 }")).get().issuer?.apps.first)
        #expect(off.appAttest?.risk.refresh == 0)
    }

    @Test func eachMistakeIsOneErrorAtItsLine() throws {
        let keys = try IssuerConfigTests.KeyFiles()
        var text = yaml(keys, app: "\n      max_risk_metric: -1")
        base.single(text, line: line(text, "max_risk_metric"), "max_risk_metric")
        text = yaml(keys, app: "\n      max_risk_metric: lots")
        base.single(text, line: line(text, "max_risk_metric"), "max_risk_metric")
        text = yaml(keys, app: "\n      require_risk_metric: true")
        base.single(text, line: line(text, "require_risk_metric"), "needs max_risk_metric")
        text = yaml(keys, app: "\n      require_risk_metric: maybe")
        base.single(text, line: line(text, "require_risk_metric"), "require_risk_metric")
        text = yaml(keys, attest: "\n        receipt_root_ca_file: \(keys.path("nope.pem"))")
        base.single(text, line: line(text, "receipt_root_ca_file"), "does not exist")
        text = yaml(keys, attest: "\n        receipt_root_ca_file: \(keys.path("sign.pem"))")
        base.single(text, line: line(text, "receipt_root_ca_file"), "not a PEM certificate")
        text = yaml(keys, attest: "\n        risk: { refresh: 10m }")
        base.single(text, line: line(text, "refresh"), "risk.refresh")
        text = yaml(keys, attest: "\n        risk: { api_url: \"ftp://x\" }")
        base.single(text, line: line(text, "api_url"), "risk.api_url")
        text = yaml(keys, attest: "\n        risk: { every: 1h }")
        base.single(text, line: line(text, "every"), "every")
    }

    /// `routes[].max_risk` and `require_risk` (docs/configuration.md): values load; each mistake is one error at its
    /// FILE:LINE:COLUMN.
    @Test func routeMaxRiskAndRequireRisk() throws {
        let base = ConfigFixture.minimal
        let settings = try ConfigFixture.load(base + "\n    max_risk: 10\n    require_risk: true").get()
        #expect(settings.routes[0].maxRisk == 10 && settings.routes[0].requireRisk)
        let plain = try ConfigFixture.load(base).get()
        #expect(plain.routes[0].maxRisk == nil && !plain.routes[0].requireRisk)
        let monitor = try ConfigFixture.load(base + "\n    enforcement: monitor\n    max_risk: 3").get()
        #expect(monitor.routes[0].maxRisk == 3 && !monitor.routes[0].requireRisk)
        #expect(ConfigFixture.messages(base + "\n    max_risk: 0") == ["10:15: route 'all' max_risk must be between 1 and 1000000, got 0"])
        #expect(ConfigFixture.messages(base + "\n    max_risk: high") == ["10:15: invalid value 'high' for route 'all' max_risk: expected a whole number"])
        #expect(ConfigFixture.messages(base + "\n    require_risk: true") == ["10:19: route 'all' require_risk: true needs max_risk in the same route"])
        #expect(ConfigFixture.messages(base + "\n    max_risk: 5\n    require_risk: yes") == [
            "11:19: invalid value 'yes' for route 'all' require_risk: expected true or false",
        ])
        #expect(ConfigFixture.messages(base + "\n    enforcement: off\n    max_risk: 5") == [
            "11:15: route 'all' max_risk has no effect with enforcement: off (no token is examined)",
        ])
        #expect(ConfigFixture.messages(base + "\n    max_risks: 5").first?.contains("did you mean 'max_risk'?") == true)
    }
}
