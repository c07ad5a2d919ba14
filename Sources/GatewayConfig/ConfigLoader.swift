import Foundation
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
        if let root = YAMLComposer.compose(yaml, decoder) {
            settings = decoder.decodeSettings(root, sourcePath: path)
        } else {
            settings = nil
        }
        let errors = decoder.errors.enumerated().sorted {
            ($0.element.line, $0.element.column, $0.offset) < ($1.element.line, $1.element.column, $1.offset)
        }.map(\.element)
        if var settings, errors.isEmpty {
            settings.warnings = decoder.warnings.enumerated().sorted {
                ($0.element.line, $0.element.column, $0.offset) < ($1.element.line, $1.element.column, $1.offset)
            }.map(\.element.description)
            return .success(settings)
        }
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
}
