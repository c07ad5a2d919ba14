import Foundation
import Glibc
import Synchronization

/// Where JSON log lines go (stdout by default). Lines are written whole under a lock, so lines of
/// different threads never interleave; loops batch their lines and write once per event batch.
public final class LogSink: Sendable {
    private let fd: Int32
    private let lock = Mutex<Void>(())
    private let levelRank: Atomic<Int>

    /// - Parameter fd: the descriptor to write to (1 = stdout).
    public init(fd: Int32 = 1, level: LogLevel = .info) {
        self.fd = fd
        levelRank = Atomic(level.rank)
    }

    public var level: LogLevel {
        get { LogLevel.allCases.first { $0.rank == levelRank.load(ordering: .relaxed) } ?? .info }
    }

    public func setLevel(_ level: LogLevel) { levelRank.store(level.rank, ordering: .relaxed) }

    public func enabled(_ level: LogLevel) -> Bool { level.rank >= levelRank.load(ordering: .relaxed) }

    /// Writes complete lines.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard var p = bytes.baseAddress, bytes.count > 0 else { return }
        var left = bytes.count
        lock.withLock { _ in
            while left > 0 {
                let n = Glibc.write(fd, p, left)
                if n < 0 { if errno == EINTR { continue }; return }
                p += n
                left -= n
            }
        }
    }

    /// Logs an operational event: `{"time":…,"severity":…,"message":…, fields…}`.
    public func log(_ level: LogLevel, _ message: String, _ fields: [(String, LogValue)] = []) {
        guard enabled(level) else { return }
        var line = JSONLine()
        line.begin(time: Date(), severity: level)
        line.field("message", message)
        for (k, v) in fields { line.field(k, v) }
        line.end()
        line.bytes.withUnsafeBytes { write($0) }
    }

    public func info(_ message: String, _ fields: [(String, LogValue)] = []) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: [(String, LogValue)] = []) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: [(String, LogValue)] = []) { log(.error, message, fields) }
    public func debug(_ message: String, _ fields: [(String, LogValue)] = []) { log(.debug, message, fields) }
}

/// A value in a log line.
public enum LogValue: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case strings([String])
    case null

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
}

/// Builds one JSON object line without Foundation's encoder (it is on the per-request path).
public struct JSONLine {
    public var bytes: [UInt8] = []
    private var first = true

    public init() { bytes.reserveCapacity(384) }

    public mutating func begin(time: Date, severity: LogLevel) {
        bytes.append(UInt8(ascii: "{"))
        first = true
        field("time", JSONLine.timestamp(time))
        field("severity", severity.severityName)
    }

    public mutating func end() {
        bytes.append(UInt8(ascii: "}"))
        bytes.append(10)
    }

    /// After opening fields and a trailing comma were appended by hand: the next field adds no comma.
    public mutating func resumeAfterSeparator() { first = true }

    private mutating func key(_ k: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: k.utf8)
        bytes.append(contentsOf: "\":".utf8)
    }

    public mutating func field(_ k: String, _ v: String) {
        key(k)
        appendString(v)
    }

    public mutating func field(_ k: String, _ v: String?) {
        key(k)
        if let v { appendString(v) } else { bytes.append(contentsOf: "null".utf8) }
    }

    public mutating func field(_ k: String, _ v: Int) {
        key(k)
        bytes.append(contentsOf: String(v).utf8)
    }

    public mutating func field(_ k: String, milliseconds v: Double) {
        key(k)
        let scaled = Int((v * 1000).rounded())
        bytes.append(contentsOf: String(scaled / 1000).utf8)
        bytes.append(UInt8(ascii: "."))
        let frac = scaled % 1000
        if frac < 100 { bytes.append(UInt8(ascii: "0")) }
        if frac < 10 { bytes.append(UInt8(ascii: "0")) }
        bytes.append(contentsOf: String(frac).utf8)
    }

    public mutating func field(_ k: String, raw: String) {
        key(k)
        bytes.append(contentsOf: raw.utf8)
    }

    public mutating func field(_ k: String, _ v: LogValue) {
        switch v {
        case .string(let s): field(k, s)
        case .int(let i): field(k, i)
        case .double(let d): key(k); bytes.append(contentsOf: (d.isFinite ? String(d) : "null").utf8)
        case .bool(let b): key(k); bytes.append(contentsOf: (b ? "true" : "false").utf8)
        case .null: key(k); bytes.append(contentsOf: "null".utf8)
        case .strings(let list):
            key(k)
            bytes.append(UInt8(ascii: "["))
            for (i, s) in list.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                appendString(s)
            }
            bytes.append(UInt8(ascii: "]"))
        }
    }

    private mutating func appendString(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\""): bytes.append(contentsOf: "\\\"".utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: "\\\\".utf8)
            case 0x0A: bytes.append(contentsOf: "\\n".utf8)
            case 0x0D: bytes.append(contentsOf: "\\r".utf8)
            case 0x09: bytes.append(contentsOf: "\\t".utf8)
            case 0..<0x20, 0x7F:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: "\\u00".utf8)
                bytes.append(hex[Int(b >> 4)])
                bytes.append(hex[Int(b & 0xF)])
            default: bytes.append(b)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// RFC 3339 UTC with milliseconds.
    public static func timestamp(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        let ms = Int((date.timeIntervalSince1970 - Double(t)) * 1000)
        var tm = tm()
        gmtime_r(&t, &tm)
        func pad(_ v: Int32, _ w: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return "\(pad(tm.tm_year + 1900, 4))-\(pad(tm.tm_mon + 1, 2))-\(pad(tm.tm_mday, 2))T"
            + "\(pad(tm.tm_hour, 2)):\(pad(tm.tm_min, 2)):\(pad(tm.tm_sec, 2)).\(pad(Int32(ms), 3))Z"
    }
}

extension LogLevel {
    /// Cloud Logging severity names.
    var severityName: String {
        switch self {
        case .debug: "DEBUG"
        case .info: "INFO"
        case .warning: "WARNING"
        case .error: "ERROR"
        }
    }
}
