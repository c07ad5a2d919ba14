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
}
