/// One problem found in a configuration file, at the position of the offending key or value.
///
/// `line` and `column` start at 1; columns count Unicode scalars (as libyaml does). Problems that concern a
/// whole file (it cannot be read, it is empty) are reported at `1:1`.
public struct ConfigError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The path the configuration was loaded from, as given to `ConfigLoader`.
    public var file: String
    /// 1-based line.
    public var line: Int
    /// 1-based column, in Unicode scalars.
    public var column: Int
    /// What is wrong, in words meant for the person who wrote the file.
    public var message: String

    /// Makes an error; `line` and `column` are 1-based.
    public init(file: String, line: Int, column: Int, message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    /// `FILE:LINE:COLUMN: message`, the form `check-config` prints (README, Commands) and editors jump to.
    public var description: String { "\(file):\(line):\(column): \(message)" }
}

/// Every problem found in one configuration file, ordered by position. Never empty.
public struct ConfigErrors: Error, CustomStringConvertible, Sendable, Equatable {
    /// All errors, sorted by line then column.
    public var errors: [ConfigError]

    /// Wraps `errors` as given.
    public init(errors: [ConfigError]) { self.errors = errors }

    /// One `FILE:LINE:COLUMN: message` per line, no trailing newline.
    public var description: String { errors.map(\.description).joined(separator: "\n") }
}
