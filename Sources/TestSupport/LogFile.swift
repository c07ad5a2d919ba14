import Foundation

/// Reading a log file that another thread or process is still writing.
public enum LogFile {
    /// The file's complete lines: a last line not yet ended by "\n" is being written and is left for the next read
    /// (a reader that took it would see it cut short). No file yet is no lines.
    public static func completeLines(_ path: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        guard let end = data.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
        return String(decoding: data[data.startIndex..<end], as: UTF8.self)
            .split(separator: "\n").map(String.init)
    }
}
