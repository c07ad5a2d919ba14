import Foundation
import Glibc

/// The `jwks.cache_file`: the raw body of the last good JWKS document, replaced atomically after each
/// successful fetch, so its modification time is the time of that fetch.
struct KeySetCacheFile: Sendable {
    /// The file's path.
    let path: String
    /// Largest file read, in bytes (1 MiB, as for a fetched document).
    var maxBytes = 1 << 20

    /// The file's bytes and modification time, or `nil` when it does not exist; throws a message when it
    /// exists but cannot be read or is too large.
    func read() throws -> (bytes: [UInt8], modified: Date)? {
        var info = stat()
        if stat(path, &info) != 0 {
            if errno == ENOENT { return nil }
            throw FetchError.file("cannot stat \(path): \(Self.errnoText())")
        }
        guard Int(info.st_size) <= maxBytes else { throw FetchError.bodyTooLarge(maxBytes) }
        let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
        let bytes = try BlockingHTTPClient(maxBodyBytes: maxBytes).get("file://" + (path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path)).body
        return (bytes, modified)
    }

    /// Writes `bytes` to a temporary file in the same directory, `fsync`s it, renames it over `path` and
    /// `fsync`s the directory: a reader (or a crash) sees the old document or the new one, never a mix.
    func write(_ bytes: [UInt8]) throws {
        let directory = (path as NSString).deletingLastPathComponent
        let dir = directory.isEmpty ? "." : directory
        let name = (path as NSString).lastPathComponent
        let temporary = "\(dir)/.\(name).tmp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FetchError.file("cannot create \(temporary): \(Self.errnoText())") }
        var ok = false
        defer { if !ok { unlink(temporary) } }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                let text = Self.errnoText()
                Glibc.close(fd)
                throw FetchError.file("cannot write \(temporary): \(text)")
            }
            offset += n
        }
        guard fsync(fd) == 0 else {
            let text = Self.errnoText()
            Glibc.close(fd)
            throw FetchError.file("cannot fsync \(temporary): \(text)")
        }
        Glibc.close(fd)
        guard rename(temporary, path) == 0 else { throw FetchError.file("cannot rename to \(path): \(Self.errnoText())") }
        ok = true
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); Glibc.close(dfd) }
    }

    static func errnoText() -> String {
        let code = errno
        return (String(validatingCString: strerror(code)) ?? "error") + " (errno \(code))"
    }
}
