@testable import GatewayConfig
import Testing

/// `YAMLComposer`: the YAML tree is built from libyaml's events in one pass, every repeated key reported where it is
/// repeated, and the file's other errors still found in the same load.
@Suite struct YAMLComposerTests {
    /// Each later occurrence is reported against the first; the last occurrence is the one the decoder reads (its
    /// wrong value is reported too).
    @Test func everyRepeatOfAKeyIsReportedAndTheLastOccurrenceIsRead() {
        let yaml = "server:\n  threads: 1\n  threads: 2\n  threads: many\n" + ConfigFixture.minimal
        #expect(ConfigFixture.messages(yaml) == [
            "3:3: duplicate key 'threads' (first at 2:3)",
            "4:3: duplicate key 'threads' (first at 2:3)",
            "4:12: invalid value 'many' for server.threads: expected auto or a number from 1 to 1024",
        ])
    }

    /// The old loader renamed a key in the text and parsed again for each repeat, and gave up after 64: 200 repeats
    /// in 100 mappings are now all found in one load, each at its own line.
    @Test func twoHundredRepeatsInAHundredMappingsAreAllReported() {
        var yaml = "app_check:\n  project_number: \"123456789012\"\nupstreams:\n"
        var expected: [String] = []
        var line = 4
        for i in 0..<100 {
            yaml += "  u\(i):\n    url: http://127.0.0.1:1\n    url: http://127.0.0.1:2\n    url: http://127.0.0.1:3\n"
            expected.append("\(line + 2):5: duplicate key 'url' (first at \(line + 1):5)")
            expected.append("\(line + 3):5: duplicate key 'url' (first at \(line + 1):5)")
            line += 4
        }
        yaml += "routes:\n  - name: all\n    prefix: /\n    upstream: u0\n"
        #expect(ConfigFixture.messages(yaml) == expected)
    }

    /// Keys compare after YAML's unescaping, whatever the spelling of either occurrence.
    @Test func keysCompareAsTheirUnescapedText() {
        #expect(ConfigFixture.messages("server:\n  'threads': 1\n  \"thr\\x65ads\": 2\n" + ConfigFixture.minimal)
            == ["3:3: duplicate key 'threads' (first at 2:3)"])
    }

    /// An alias stands for its anchor's node, as a value or as a key; a repeat written through an alias is
    /// reported at the alias.
    @Test func aliasesStandForTheirAnchorsNode() {
        let values = "app_check:\n  project_number: \"123456789012\"\nupstreams:\n  api:\n    url: http://127.0.0.1:3000\n"
            + "routes:\n  - name: v2\n    prefix: /v2/\n    upstream: &up api\n  - name: all\n    prefix: /\n    upstream: *up\n"
        guard case let .success(settings) = ConfigFixture.load(values) else {
            Issue.record("\(ConfigFixture.messages(values))")
            return
        }
        #expect(settings.routes.map { settings.upstreams[$0.upstreamIndex].name } == ["api", "api"])
        #expect(ConfigFixture.messages("server:\n  &k threads: 1\n  *k : 2\n" + ConfigFixture.minimal)
            == ["3:3: duplicate key 'threads' (first at 2:3)"])
    }

    /// Nesting is bounded (the tree is freed recursively): 100 levels load as far as the decoder is concerned, 101 stop
    /// the load at the collection that goes past the bound.
    @Test func nestingIsBoundedAtAHundredLevels() {
        let hundred = String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "\n"
        #expect(ConfigFixture.messages(hundred).first?.contains("nest deeper") == false)
        let deeper = String(repeating: "[", count: 100_000) + "\n"
        #expect(ConfigFixture.messages(deeper) == [
            "1:101: YAML structure error: lists and mappings nest deeper than 100 levels here",
        ])
    }
}
