/// `${VAR}` substitution in configuration scalars (docs/configuration.md).
///
/// Applied to each scalar value of the parsed tree, never to the raw text, so a variable can neither inject YAML
/// structure nor shift the line/column of any error. Keys are not expanded.
/// - `${NAME}`: the variable's value; an unset variable is an error. A set but empty variable gives "".
/// - `${NAME:-default}`: `default` when NAME is unset **or empty** (as in POSIX sh); the default is literal text
///   up to the first `}` and is not itself expanded.
/// - `$${` is the escape for a literal `${`. Any other `$` is literal. Values are not expanded again.
/// - NAME is `[A-Za-z_][A-Za-z0-9_]*`.
enum EnvironmentExpansion {
    /// The expanded text, or the first problem in it.
    static func expand(_ text: String, environment: [String: String]) -> Result<String, ConfigValueFailure> {
        guard text.contains("$") else { return .success(text) }
        var output = ""
        var index = text.startIndex
        while index < text.endIndex {
            let rest = text[index...]
            if rest.hasPrefix("$${") {
                output += "${"
                index = text.index(index, offsetBy: 3)
            } else if rest.hasPrefix("${") {
                let bodyStart = text.index(index, offsetBy: 2)
                guard let close = text[bodyStart...].firstIndex(of: "}") else {
                    return .failure(.init("unterminated '${' (write '$${' for a literal '${')"))
                }
                let body = text[bodyStart..<close]
                let name: Substring
                let fallback: Substring?
                if let separator = body.range(of: ":-") {
                    name = body[..<separator.lowerBound]
                    fallback = body[separator.upperBound...]
                } else {
                    name = body
                    fallback = nil
                }
                guard isVariableName(name) else {
                    return .failure(.init("invalid variable reference '${\(body)}': expected ${NAME} or ${NAME:-default}"))
                }
                let value = environment[String(name)]
                if let fallback, value == nil || value == "" {
                    output += fallback
                } else if let value {
                    output += value
                } else {
                    return .failure(.init("environment variable '\(name)' is not set (write ${\(name):-default} to give a default)"))
                }
                index = text.index(after: close)
            } else {
                output.append(text[index])
                index = text.index(after: index)
            }
        }
        return .success(output)
    }

    static func isVariableName(_ name: Substring) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter || first == "_" else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }
}
