import Foundation
import Glibc

/// Client threads that each send keep-alive `GET`s to 127.0.0.1 in a loop until stopped, recording every
/// status and every failure with the time it happened (for reload and drain tests under load).
///
/// A thread reconnects after a `Connection: close` response or a failed exchange, and ends at the first
/// connection that cannot be made (a refused connect is the end of a drain, not something to spin on).
public final class KeepAliveLoad: @unchecked Sendable {
    public struct Failure: Sendable, CustomStringConvertible {
        public var time: Date
        /// true when the connect itself failed (nothing was sent).
        public var connect: Bool
        public var message: String
        public var description: String { "\(connect ? "connect" : "exchange"): \(message)" }
    }

    private let lock = NSLock()
    private var statusCounts: [Int: Int] = [:]
    private var failureList: [Failure] = []
    private var lastResponse: [Int: Date] = [:]
    private var stopped = false
    private let group = DispatchGroup()

    /// Starts `threads` clients on `port`, each sending `GET path` over keep-alive connections.
    public init(port: UInt16, path: String, threads: Int, readTimeout: Double = 5) {
        for i in 0..<threads {
            group.enter()
            let t = Thread { [self] in
                defer { group.leave() }
                run(index: i, port: port, path: path, readTimeout: readTimeout)
            }
            t.stackSize = 1 << 20
            t.start()
        }
    }

    private var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }

    private func run(index: Int, port: UInt16, path: String, readTimeout: Double) {
        let request = "GET \(path) HTTP/1.1\r\nHost: load\r\nUser-Agent: load-\(index)\r\n\r\n"
        var client: RawHTTPClient?
        while !isStopped {
            if client == nil {
                do { client = try RawHTTPClient(port: port, timeout: readTimeout) } catch {
                    record(failure: Failure(time: Date(), connect: true, message: "\(error)"))
                    return
                }
            }
            do {
                try client!.send(request)
                let r = try client!.readResponse()
                record(status: r.status)
                if r.header("Connection")?.lowercased() == "close" { client = nil }
            } catch {
                record(failure: Failure(time: Date(), connect: false, message: "\(error)"))
                client = nil
            }
        }
    }

    private func record(status: Int) {
        lock.lock(); statusCounts[status, default: 0] += 1; lock.unlock()
    }

    private func record(failure: Failure) {
        lock.lock(); failureList.append(failure); lock.unlock()
    }

    /// Responses by status so far.
    public var statuses: [Int: Int] { lock.lock(); defer { lock.unlock() }; return statusCounts }

    /// Responses so far (any status).
    public var responseCount: Int { statuses.values.reduce(0, +) }

    public var failures: [Failure] { lock.lock(); defer { lock.unlock() }; return failureList }

    /// Waits (at most `timeout` seconds) until `count` responses have been received; false on timeout.
    public func waitForResponses(_ count: Int, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while responseCount < count {
            if Date() >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    /// Waits (at most `timeout` seconds) for every thread to end on its own (after refused connects).
    public func waitForThreads(timeout: Double) -> Bool { group.wait(timeout: .now() + timeout) == .success }

    /// Asks every thread to stop after its current exchange; true when all ended within `timeout` seconds.
    @discardableResult
    public func stop(timeout: Double = 15) -> Bool {
        lock.lock(); stopped = true; lock.unlock()
        return group.wait(timeout: .now() + timeout) == .success
    }
}
