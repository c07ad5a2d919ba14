import Foundation
import Yams
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads the YAML configuration of docs/configuration.md into validated `Settings`.
///
/// Every problem is reported, not just the first: the loader keeps walking after an error and returns them all,
/// sorted by position, each as `FILE:LINE:COLUMN: message` at the offending key or value. Rules the product contract leaves
/// open are decided in docs/behaviour.md ("Choices where a proxy must choose"); the main ones:
/// - `${VAR}` / `${VAR:-default}` are expanded in scalar values (not keys), see `EnvironmentExpansion`.
/// - Durations: a decimal number and a unit `ms`, `s`, `m`, `h`, `d` (`1.5s` is fine; a bare number is an error).
/// - Sizes: a whole number of bytes, or with `B`, `KB`/`MB`/`GB` (×1000) or `KiB`/`MiB`/`GiB` (×1024).
/// - A YAML null value (`key:`, `~`, `null`) means "use the default".
/// - List fields (`listen`, `trusted_proxies`, `app_ids`, `methods`) also accept a single string.
public enum ConfigLoader {
    /// Largest configuration file read: 4 MiB.
    public static let maxFileBytes = 4 << 20

    /// Reads and validates the file at `path`. A missing or unreadable file is the single error
    /// `FILE:1:1: cannot read file: <strerror>`. `threads: auto` resolves to the active processor count.
    public static func load(path: String,
                            environment: [String: String] = ProcessInfo.processInfo.environment)
        -> Result<Settings, ConfigErrors> {
        switch readFile(path) {
        case let .success(text):
            return load(yaml: text, path: path, environment: environment,
                        cores: ProcessInfo.processInfo.activeProcessorCount)
        case let .failure(failure):
            return .failure(ConfigErrors(errors: [
                ConfigError(file: path, line: 1, column: 1, message: "cannot read file: \(failure.message)"),
            ]))
        }
    }

    /// Validates `yaml` as if read from `path` (used only in messages and `Settings.sourcePath`).
    /// `cores` is what `threads: auto` (the default) resolves to; values below 1 count as 1.
    public static func load(yaml: String, path: String,
                            environment: [String: String] = ProcessInfo.processInfo.environment,
                            cores: Int = ProcessInfo.processInfo.activeProcessorCount)
        -> Result<Settings, ConfigErrors> {
        let decoder = ConfigDecoder(file: path, environment: environment, cores: max(1, cores))
        let settings: Settings?
        if let root = compose(yaml, decoder) {
            settings = decoder.decodeSettings(root, sourcePath: path)
        } else {
            settings = nil
        }
        let errors = decoder.errors.enumerated().sorted {
            ($0.element.line, $0.element.column, $0.offset) < ($1.element.line, $1.element.column, $1.offset)
        }.map(\.element)
        if let settings, errors.isEmpty { return .success(settings) }
        if errors.isEmpty {
            // Not reachable: decoding only fails after reporting. Kept so a bug cannot yield an empty error list.
            return .failure(ConfigErrors(errors: [ConfigError(file: path, line: 1, column: 1, message: "invalid configuration")]))
        }
        return .failure(ConfigErrors(errors: errors))
    }

    // MARK: File

    static func readFile(_ path: String) -> Result<String, ConfigValueFailure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(.init(String(cString: strerror(errno)))) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(.init(String(cString: strerror(errno))))
            }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
            if bytes.count > maxFileBytes {
                return .failure(.init("file is larger than \(ConfigValueParser.formatSize(Int64(maxFileBytes)))"))
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return .failure(.init("file is not valid UTF-8"))
        }
        return .success(text)
    }

    // MARK: YAML

    /// First private-use scalar of the stand-in keys used to recover from duplicate keys.
    private static let placeholderBase: UInt32 = 0xE000
    private static let maxDuplicateRecoveries = 64

    /// Parses `yaml` into a node tree; nil after reporting a syntax error or an empty document.
    ///
    /// Yams rejects a mapping with a repeated key as a whole, which would hide every other error. So on that
    /// error the first occurrence is renamed in the text to a same-length stand-in (columns stay exact), the
    /// text is parsed again, and each stand-in is then reported as a duplicate at the later occurrence and
    /// dropped from the tree.
    static func compose(_ yaml: String, _ decoder: ConfigDecoder) -> Node? {
        var text = yaml
        var renamed: [String: String] = [:]  // stand-in → original key
        for attempt in 0...maxDuplicateRecoveries {
            do {
                // Tags are not resolved: the decoder reads every scalar as text, so `1` and `"1"` are the same key
                // (under Yams' default resolver they differed, and one silently replaced the other), and no regular
                // expression runs per scalar. UTF-8 is named so Yams does not consult the environment each time.
                guard let root = try Yams.compose(yaml: text, .basic, .default, .utf8) else {
                    decoder.error(.start, "the configuration is empty; app_check and routes are required")
                    return nil
                }
                return renamed.isEmpty ? root : removingPlaceholders(root, renamed, decoder)
            } catch let YamlError.duplicatedKeysInMapping(duplicates, context) {
                let key = duplicates.first ?? ""
                let position = ConfigPosition(line: context.mark.line, column: context.mark.column)
                guard attempt < maxDuplicateRecoveries,
                      let scalar = Unicode.Scalar(placeholderBase + UInt32(attempt)),
                      let (newText, standIn) = rename(key: key, at: position, in: text, prefix: scalar) else {
                    decoder.error(position, "duplicate key '\(key)'")
                    return nil
                }
                text = newText
                renamed[standIn] = key
            } catch let error as YamlError {
                report(error, decoder)
                return nil
            } catch {
                decoder.error(.start, "cannot parse YAML: \(error)")
                return nil
            }
        }
        return nil
    }

    /// Replaces the key spelled at `position` (after an opening quote, if any) with a stand-in of the same
    /// number of Unicode scalars. Nil when the text there is not the key verbatim (escapes, multi-line keys).
    private static func rename(key: String, at position: ConfigPosition, in text: String,
                               prefix: Unicode.Scalar) -> (String, String)? {
        let keyScalars = Array(key.unicodeScalars)
        guard !keyScalars.isEmpty, !keyScalars.contains("\n"), position.line >= 1, position.column >= 1 else { return nil }
        // Only the line that holds the key is walked scalar by scalar (columns count scalars); the rest is copied.
        let scalars = text.unicodeScalars
        var index = scalars.startIndex
        for _ in 1..<position.line {
            guard let newline = scalars[index...].firstIndex(of: "\n") else { return nil }
            index = scalars.index(after: newline)
        }
        for _ in 1..<position.column {
            guard index < scalars.endIndex, scalars[index] != "\n" else { return nil }
            scalars.formIndex(after: &index)
        }
        guard index < scalars.endIndex, scalars[index] != "\n" else { return nil }
        if scalars[index] == "\"" || scalars[index] == "'" { scalars.formIndex(after: &index) }
        var end = index
        for expected in keyScalars {
            guard end < scalars.endIndex, scalars[end] == expected else { return nil }
            scalars.formIndex(after: &end)
        }
        var standIn = String.UnicodeScalarView()
        standIn.append(prefix)
        for _ in 1..<keyScalars.count { standIn.append(Unicode.Scalar(placeholderBase)!) }
        var newText = String.UnicodeScalarView()
        newText.append(contentsOf: scalars[..<index])
        newText.append(contentsOf: standIn)
        newText.append(contentsOf: scalars[end...])
        return (String(newText), String(standIn))
    }

    /// Reports each stand-in key as a duplicate of the key it replaced and removes it from its mapping.
    private static func removingPlaceholders(_ node: Node, _ renamed: [String: String], _ decoder: ConfigDecoder) -> Node {
        switch node {
        case let .mapping(mapping):
            var pairs: [(Node, Node)] = []
            for (key, value) in mapping {
                if let standIn = key.scalar?.string, let original = renamed[standIn] {
                    let first = ConfigPosition(key)
                    let other = mapping.first { $0.key.scalar?.string == original }.map { ConfigPosition($0.key) }
                    if let other {
                        let (earlier, later) = first < other ? (first, other) : (other, first)
                        decoder.error(later, "duplicate key '\(original)' (first at \(earlier))")
                    } else {
                        decoder.error(first, "duplicate key '\(original)'")
                    }
                    continue
                }
                pairs.append((key, removingPlaceholders(value, renamed, decoder)))
            }
            return .mapping(Node.Mapping(pairs, mapping.tag, mapping.style, mapping.mark))
        case let .sequence(sequence):
            return .sequence(Node.Sequence(sequence.map { removingPlaceholders($0, renamed, decoder) },
                                           sequence.tag, sequence.style, sequence.mark))
        default:
            return node
        }
    }

    private static func report(_ error: YamlError, _ decoder: ConfigDecoder) {
        func syntax(_ kind: String, _ context: YamlError.Context?, _ problem: String, _ mark: Mark) {
            var message = "YAML \(kind) error: \(problem)"
            if let context { message += " (\(context.text) at \(context.mark))" }
            decoder.error(ConfigPosition(line: mark.line, column: mark.column), message)
        }
        switch error {
        case let .scanner(context, problem, mark, _): syntax("syntax", context, problem, mark)
        case let .parser(context, problem, mark, _): syntax("syntax", context, problem, mark)
        case let .composer(context, problem, mark, _): syntax("structure", context, problem, mark)
        case let .reader(problem, offset, _, yaml):
            var position = ConfigPosition.start
            if let offset {
                let prefix = yaml.prefix(offset)
                position.line = prefix.filter { $0 == "\n" }.count + 1
                position.column = (prefix.split(separator: "\n", omittingEmptySubsequences: false).last?.unicodeScalars.count ?? 0) + 1
            }
            decoder.error(position, "cannot read YAML: \(problem)")
        default:
            decoder.error(.start, "cannot parse YAML: \(error)")
        }
    }
}
