import EventLoop
import Foundation
import Glibc
import HTTPWire

/// A response as a test sees it.
public struct TestResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A blocking client over a real TCP socket to 127.0.0.1, for sending exact bytes (including malformed
/// ones) and reading exact answers. Every read has a timeout so a test can never hang.
public final class RawHTTPClient {
    public let fd: Int32
    private var buffer: [UInt8] = []
    public private(set) var peerClosed = false

    /// Connects to 127.0.0.1:`port`, from `source` (another loopback address such as 127.0.0.2, to be a second
    /// client address) when given.
    public init(port: UInt16, timeout: Double = 5, source: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketError("socket") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            guard let local = SocketAddress(ip: source, port: 0), local.withSockAddr({ bind(fd, $0, $1) }) == 0 else {
                throw SocketError("bind \(source)")
            }
        }
        guard let address = SocketAddress(ip: "127.0.0.1", port: port),
              address.withSockAddr({ Glibc.connect(fd, $0, $1) }) == 0 else {
            // No close here: the object is fully initialised, so throwing runs `deinit`, which closes `fd`.
            // (Closing twice would close whatever socket another test was given that number meanwhile.)
            throw SocketError("connect 127.0.0.1:\(port)")
        }
    }

    deinit { Glibc.close(fd) }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { throw SocketError("send") }
            offset += n
        }
    }

    /// Reads more bytes; false on EOF or timeout.
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { buffer.append(contentsOf: chunk[0..<n]); return true }
        if n == 0 { peerClosed = true }
        return false
    }

    /// Reads one complete response (skipping 1xx unless `interim`). Throws on timeout, EOF or bad framing.
    public func readResponse(requestMethod: String = "GET", interim: Bool = false) throws -> TestResponse {
        var parser = HTTPResponseHeadParser(limits: HTTPParserLimits(maxHeadBytes: 1 << 20, maxHeaders: 1000))
        while true {
            let result = buffer.withUnsafeBytes { parser.parse($0) }
            switch result {
            case .needMore:
                if !fill() { throw HarnessError("no complete response head (closed: \(peerClosed), got \(buffer.count) bytes)") }
            case .failure(let e):
                throw HarnessError("bad response head: \(e)")
            case .complete(let head, let consumed):
                buffer.removeFirst(consumed)
                parser.reset()
                if head.status < 200 && !interim { continue }
                var headers: [(String, String)] = []
                for i in 0..<head.headers.count { headers.append((head.headers.name(at: i), head.headers.value(at: i))) }
                let body = try readBody(head.framing(requestMethod: requestMethod))
                return TestResponse(status: head.status, headers: headers, body: body)
            }
        }
    }

    private func readBody(_ framing: ResponseBodyFraming) throws -> [UInt8] {
        switch framing {
        case .none:
            return []
        case .contentLength(let n):
            while buffer.count < Int(n) { if !fill() { throw HarnessError("body cut short") } }
            let body = Array(buffer[0..<Int(n)])
            buffer.removeFirst(Int(n))
            return body
        case .chunked:
            var decoder = ChunkedDecoder()
            var body: [UInt8] = []
            while true {
                let r = buffer.withUnsafeBytes { decoder.decode($0) { body.append(contentsOf: $0) } }
                switch r {
                case .consumed(let n):
                    buffer.removeFirst(n)
                    if !fill() { throw HarnessError("chunked body cut short") }
                case .done(let n):
                    buffer.removeFirst(n)
                    return body
                case .failure(let e):
                    throw HarnessError("bad chunked body: \(e)")
                }
            }
        case .untilClose:
            while fill() {}
            let body = buffer
            buffer.removeAll()
            return body
        }
    }

    /// Reads whatever arrives within `timeout` seconds (for raw protocol tests); empty on EOF or timeout.
    public func readRaw(timeout: Double = 3) -> [UInt8] {
        if !buffer.isEmpty { let b = buffer; buffer.removeAll(); return b }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) > 0, fill() else { return [] }
        let b = buffer
        buffer.removeAll()
        return b
    }

    /// True when the peer closes the connection within `timeout` seconds with nothing more to read.
    public func waitForClose(timeout: Double = 3) -> Bool {
        if peerClosed { return buffer.isEmpty }
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 100) > 0 {
                if !fill() { return peerClosed && buffer.isEmpty }
            }
        }
        return false
    }

    /// One request, one response; `timeout` bounds each read.
    public static func roundTrip(port: UInt16, _ request: String, method: String = "GET", timeout: Double = 5,
                                 source: String? = nil) throws -> TestResponse {
        let c = try RawHTTPClient(port: port, timeout: timeout, source: source)
        try c.send(request)
        return try c.readResponse(requestMethod: method)
    }
}

/// Runs a program to completion (with a time limit) and captures its output.
public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

public enum Run {
    /// Runs `executable` (a path or a name looked up in PATH) with `arguments`.
    public static func command(_ executable: String, _ arguments: [String], input: Data? = nil,
                               timeout: Double = 60, environment: [String: String]? = nil) throws -> ProcessResult {
        let p = Process()
        if executable.contains("/") {
            p.executableURL = URL(fileURLWithPath: executable)
            p.arguments = arguments
        } else {
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = [executable] + arguments
        }
        if let environment { p.environment = environment }
        let out = Pipe(), err = Pipe(), inp = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = inp
        try p.runHoldingEnvironment()
        if let input { inp.fileHandleForWriting.write(input) }
        try? inp.fileHandleForWriting.close()
        let outData = LockedData(), errData = LockedData()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async { outData.set(out.fileHandleForReading.readDataToEndOfFile()); group.leave() }
        group.enter()
        DispatchQueue.global().async { errData.set(err.fileHandleForReading.readDataToEndOfFile()); group.leave() }
        let deadline = Date().addingTimeInterval(timeout)
        while p.isRunning && Date() < deadline { usleep(5_000) }
        if p.isRunning {
            p.terminate()
            p.waitUntilExit()
            throw HarnessError("\(executable) \(arguments.joined(separator: " ")) timed out after \(timeout)s")
        }
        p.waitUntilExit()
        group.wait()
        return ProcessResult(status: p.terminationStatus, stdout: String(decoding: outData.get(), as: UTF8.self),
                             stderr: String(decoding: errData.get(), as: UTF8.self))
    }

    /// The built `appcheck-gateway` binary next to the test bundle.
    public static var gatewayBinary: String {
        var dir = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("appcheck-gateway").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return ".build/debug/appcheck-gateway"
    }
}

final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    func get() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}
