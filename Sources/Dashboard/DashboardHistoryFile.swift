import Foundation
import Glibc

/// `dashboard.history_file`: the history as JSON, written whole every minute (temp file in the same folder,
/// fsync, rename: a reader or a crash sees the old file or the new one, never half of one) and read at start.
enum DashboardHistoryFile {
    enum LoadResult {
        case loaded(DashboardHistory)
        /// No file yet: a normal first start.
        case absent
        /// Unreadable, not JSON, another program's file or another build's shapes: start empty, say why.
        case refused(String)
    }

    static func load(path: String) -> LoadResult {
        guard FileManager.default.fileExists(atPath: path) else { return .absent }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            return .refused("cannot read: \(error.localizedDescription)")
        }
        let history: DashboardHistory
        do { history = try JSONDecoder().decode(DashboardHistory.self, from: data) } catch {
            return .refused("not a dashboard history file (\(Self.describe(error)))")
        }
        guard history.isValid else {
            return .refused("not a dashboard history file of this version (format '\(history.format)' version \(history.version), or unexpected bucket shapes)")
        }
        return .loaded(history)
    }

    /// Writes atomically; throws with the step that failed.
    static func save(_ history: DashboardHistory, path: String) throws {
        let data = try JSONEncoder().encode(history)
        let temp = path + ".tmp-\(getpid())"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw HistoryFileError("open \(temp): \(String(cString: strerror(errno)))") }
        var ok = data.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                guard let base = raw.baseAddress else { return true }
                let n = write(fd, base + offset, raw.count - offset)
                if n < 0 { if errno == EINTR { continue }; return false }
                offset += n
            }
            return true
        }
        let writeErrno = errno
        if ok && fsync(fd) != 0 { ok = false }
        close(fd)
        guard ok else {
            unlink(temp)
            throw HistoryFileError("write \(temp): \(String(cString: strerror(writeErrno)))")
        }
        guard rename(temp, path) == 0 else {
            let e = errno
            unlink(temp)
            throw HistoryFileError("rename to \(path): \(String(cString: strerror(e)))")
        }
    }

    private static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c): return c.debugDescription
        case DecodingError.keyNotFound(let k, _): return "missing key '\(k.stringValue)'"
        case DecodingError.typeMismatch(_, let c): return "wrong type at \(c.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.valueNotFound(_, let c): return "null at \(c.codingPath.map(\.stringValue).joined(separator: "."))"
        default: return "\(error)"
        }
    }
}

/// A history file could not be written.
struct HistoryFileError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
