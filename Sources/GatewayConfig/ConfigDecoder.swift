import Foundation

/// A 1-based line and column in the configuration file.
struct ConfigPosition: Sendable, Equatable, Comparable, CustomStringConvertible {
    var line: Int
    var column: Int

    /// Where whole-file problems are reported.
    static let start = ConfigPosition(line: 1, column: 1)

    init(line: Int, column: Int) { self.line = line; self.column = column }
    init(_ mark: Mark) { self.init(line: mark.line, column: mark.column) }
    init(_ node: Node) { self.init(node.mark) }

    static func < (a: ConfigPosition, b: ConfigPosition) -> Bool { (a.line, a.column) < (b.line, b.column) }
    var description: String { "\(line):\(column)" }
}

/// The keys of one YAML mapping as the user wrote them, unknown keys already reported.
struct ConfigFields {
    /// Dotted name used in messages: `server.limits`, `routes[0]`, `upstreams.api`.
    let context: String
    /// Position of the mapping itself (its first key for block mappings).
    let position: ConfigPosition
    private let entries: [String: (key: Node, value: Node)]

    init(context: String, position: ConfigPosition, entries: [String: (key: Node, value: Node)]) {
        self.context = context
        self.position = position
        self.entries = entries
    }

    /// The value written for `key`, or nil when the key is absent or its value is YAML null (`~`, `null`, empty),
    /// which means "use the default" everywhere.
    func value(_ key: String) -> Node? {
        guard let value = entries[key]?.value, !value.isNull else { return nil }
        return value
    }

    /// Where `key` itself was written, if it was.
    func keyPosition(_ key: String) -> ConfigPosition? { entries[key].map { ConfigPosition($0.key) } }
}

extension Node {
    /// A plain scalar spelled as YAML null. Quoted `""` is an empty string, not null.
    var isNull: Bool {
        guard case let .scalar(scalar) = self, scalar.style == .plain || scalar.style == .any else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.string)
    }

    var kindName: String {
        switch self {
        case .scalar: "a scalar"
        case .mapping: "a mapping"
        case .sequence: "a list"
        }
    }
}

/// Walks the composed YAML tree, collecting every error instead of stopping at the first, and turns scalars into
/// typed values. One instance per load; not shared between threads.
final class ConfigDecoder {
    let file: String
    let environment: [String: String]
    let cores: Int
    private(set) var errors: [ConfigError] = []
    /// Settings that load but do not do what they seem to (docs/configuration.md, "Warnings"); never block a load.
    private(set) var warnings: [ConfigError] = []
    /// Every provider a route's `providers` lists, with where, for the warnings made once the issuer is known.
    var providerMentions: [(context: String, name: String, position: ConfigPosition)] = []
    /// Every route's `max_risk`, with where, for the same warnings.
    var routeRiskMentions: [(context: String, position: ConfigPosition)] = []
    /// Where `app_check.jwks.url: none` was written (for the error when nothing else could verify a token).
    var jwksURLPosition: ConfigPosition?

    init(file: String, environment: [String: String], cores: Int) {
        self.file = file
        self.environment = environment
        self.cores = cores
    }

    func error(_ position: ConfigPosition, _ message: String) {
        errors.append(ConfigError(file: file, line: position.line, column: position.column, message: message))
    }

    func error(_ node: Node, _ message: String) { error(ConfigPosition(node), message) }

    /// Records a warning; its message is printed as `FILE:LINE:COLUMN: warning: message`.
    func warning(_ position: ConfigPosition, _ message: String) {
        warnings.append(ConfigError(file: file, line: position.line, column: position.column, message: "warning: " + message))
    }

    // MARK: Structure

    /// Reads `node` as a mapping whose keys must all be in `known`; any other key is reported at the key, with
    /// the closest known key as a suggestion. Returns nil (after reporting) when `node` is not a mapping.
    func fields(_ node: Node, _ context: String, known: [String]) -> ConfigFields? {
        guard case let .mapping(mapping) = node else {
            error(node, "expected a mapping for \(context), got \(node.kindName)")
            return nil
        }
        var entries: [String: (key: Node, value: Node)] = [:]
        for (key, value) in mapping {
            guard case let .scalar(scalar) = key else {
                error(key, "keys in \(context) must be plain strings, got \(key.kindName)")
                continue
            }
            let name = scalar.string
            if known.contains(name) {
                entries[name] = (key, value)
            } else {
                var message = "unknown key '\(name)' in \(context)"
                if let home = Self.sectionOwning(name, misplacedIn: context) {
                    message += "; it belongs under \(home) (\(home.split(separator: ".").joined(separator: ": ")): \(name): …)"
                } else if let suggestion = Self.closest(to: name, among: known) {
                    message += "; did you mean '\(suggestion)'?"
                } else {
                    message += " (known keys: \(known.joined(separator: ", ")))"
                }
                error(key, message)
            }
        }
        return ConfigFields(context: context, position: ConfigPosition(node), entries: entries)
    }

    /// The elements of a list field. A single scalar is accepted as a one-element list, so that
    /// `listen: ${LISTEN}` works from an environment variable.
    func list(_ node: Node, _ what: String) -> [Node]? {
        switch node {
        case let .sequence(sequence): return Array(sequence)
        case .scalar: return [node]
        default:
            error(node, "expected a list for \(what), got \(node.kindName)")
            return nil
        }
    }

    // MARK: Scalars

    /// The text of a scalar after `${VAR}` expansion; reports and returns nil for mappings, lists and failed
    /// expansions.
    func string(_ node: Node, _ what: String) -> String? {
        guard case let .scalar(scalar) = node else {
            error(node, "expected a string for \(what), got \(node.kindName)")
            return nil
        }
        switch EnvironmentExpansion.expand(scalar.string, environment: environment) {
        case let .success(text): return text
        case let .failure(failure):
            error(node, failure.message)
            return nil
        }
    }

    func nonEmptyString(_ node: Node, _ what: String) -> String? {
        guard let text = string(node, what) else { return nil }
        guard !text.isEmpty else {
            error(node, "\(what) must not be empty")
            return nil
        }
        return text
    }

    /// `true` or `false`, any letter case.
    func bool(_ node: Node, _ what: String) -> Bool? {
        guard let text = string(node, what) else { return nil }
        switch text.lowercased() {
        case "true": return true
        case "false": return false
        default:
            error(node, "invalid value '\(text)' for \(what): expected true or false")
            return nil
        }
    }

    /// A decimal integer in `range`.
    func int(_ node: Node, _ what: String, in range: ClosedRange<Int>) -> Int? {
        guard let text = string(node, what) else { return nil }
        guard let value = Int(text) else {
            error(node, "invalid value '\(text)' for \(what): expected a whole number")
            return nil
        }
        guard range.contains(value) else {
            error(node, "\(what) must be \(Self.describe(range)), got \(value)")
            return nil
        }
        return value
    }

    /// A duration (`ConfigValueParser.duration`) in seconds, within `range`; zero only when the range starts at 0.
    func duration(_ node: Node, _ what: String, in range: ClosedRange<Double>) -> Double? {
        guard let text = string(node, what) else { return nil }
        guard let seconds = ConfigValueParser.duration(text) else {
            error(node, "invalid duration '\(text)' for \(what): expected a number and a unit ms, s, m, h or d (e.g. 250ms, 30s, 1.5s)")
            return nil
        }
        if seconds == 0 && range.lowerBound > 0 {
            error(node, "\(what) must be positive, got \(text)")
            return nil
        }
        guard range.contains(seconds) else {
            error(node, "\(what) must be between \(ConfigValueParser.formatDuration(range.lowerBound)) and \(ConfigValueParser.formatDuration(range.upperBound)), got \(text)")
            return nil
        }
        return seconds
    }

    /// A size (`ConfigValueParser.size`) in bytes, within `range`.
    func size(_ node: Node, _ what: String, in range: ClosedRange<Int64>) -> Int64? {
        guard let text = string(node, what) else { return nil }
        guard let bytes = ConfigValueParser.size(text) else {
            error(node, "invalid size '\(text)' for \(what): expected bytes or a number with B, KB, KiB, MB, MiB, GB or GiB (e.g. 16KiB)")
            return nil
        }
        guard range.contains(bytes) else {
            error(node, "\(what) must be between \(ConfigValueParser.formatSize(range.lowerBound)) and \(ConfigValueParser.formatSize(range.upperBound)), got \(text)")
            return nil
        }
        return bytes
    }

    /// One of the raw values of `T`, exactly as spelled.
    func choice<T: RawRepresentable>(_ node: Node, _ what: String, _ options: [T]) -> T?
    where T.RawValue == String {
        guard let text = string(node, what) else { return nil }
        if let value = T(rawValue: text), options.map(\.rawValue).contains(text) { return value }
        let names = options.map(\.rawValue)
        error(node, "invalid value '\(text)' for \(what): expected \(names.joined(separator: ", ").replacingLastComma())")
        return nil
    }

    /// A `host:port` or `[v6]:port`; port 0 (any free port) is allowed for listeners.
    func hostPort(_ node: Node, _ what: String) -> HostPort? {
        guard let text = string(node, what) else { return nil }
        return parseHostPort(text, node, what)
    }

    /// `hostPort` for text already expanded from `node`.
    func parseHostPort(_ text: String, _ node: Node, _ what: String) -> HostPort? {
        switch ConfigValueParser.hostPort(text, defaultPort: nil) {
        case let .success(value): return value
        case let .failure(failure):
            error(node, "invalid address '\(text)' for \(what): \(failure.message)")
            return nil
        }
    }

    /// A path to a file that exists, is not a directory and can be read by this process.
    func readableFile(_ node: Node, _ what: String) -> String? {
        guard let path = nonEmptyString(node, what) else { return nil }
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            error(node, "\(what) '\(path)' does not exist")
            return nil
        }
        if isDirectory.boolValue {
            error(node, "\(what) '\(path)' is a directory, expected a file")
            return nil
        }
        if access(path, R_OK) != 0 {
            error(node, "\(what) '\(path)' is not readable: \(String(cString: strerror(errno)))")
            return nil
        }
        return path
    }

    // MARK: Helpers

    /// The known name nearest to `name` by edit distance, when it is close enough to be a typo: at most one edit
    /// per three characters of the known name (at least one, at most three), where swapping two neighbouring
    /// characters is one edit (`ulr` → `url`, `enforcment` → `enforcement`). Ties go to the earlier known name.
    static func closest(to name: String, among known: [String]) -> String? {
        // At most 3 edits are suggested, and an edit distance is at least the difference in length: longer or
        // shorter names are skipped without computing it (an unknown key can be kilobytes long).
        let name = Array(name.lowercased())
        var best: (key: String, distance: Int)?
        for candidate in known {
            let other = Array(candidate.lowercased())
            let limit = max(1, min(3, other.count / 3))
            guard abs(other.count - name.count) <= limit else { continue }
            let distance = editDistance(name, other)
            if distance <= limit, distance < best?.distance ?? Int.max { best = (candidate, distance) }
        }
        return best?.key
    }

    /// Edit distance with adjacent transpositions (optimal string alignment): insertions, deletions,
    /// substitutions and swaps of two neighbouring characters each cost one.
    static func editDistance(_ a: String, _ b: String) -> Int { editDistance(Array(a), Array(b)) }

    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var beforePrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                var d = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d = min(d, beforePrevious[j - 2] + 1)
                }
                current[j] = d
            }
            (beforePrevious, previous, current) = (previous, current, beforePrevious)
        }
        return previous[b.count]
    }

    static func describe(_ range: ClosedRange<Int>) -> String {
        if range.upperBound == Int.max { return "at least \(range.lowerBound)" }
        return "between \(range.lowerBound) and \(range.upperBound)"
    }
}

extension String {
    /// "a, b, c" → "a, b or c".
    func replacingLastComma() -> String {
        guard let range = range(of: ", ", options: .backwards) else { return self }
        return replacingCharacters(in: range, with: " or ")
    }
}
