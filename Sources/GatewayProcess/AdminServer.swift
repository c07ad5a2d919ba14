import Gateway
import ProxyCore
import Dashboard
import EventLoop
import Foundation
import HTTPWire

/// What the admin endpoints report; supplied by the server.
protocol AdminState: AnyObject, Sendable {
    /// nil when ready, else the list of what is missing (for `/readyz`).
    func readinessProblems() -> [String]
    /// Prometheus text exposition (0.0.4), delivered on any thread.
    func metricsText(_ completion: @escaping @Sendable (String) -> Void)
    /// `/dashboard.json` (docs/dashboard.md), delivered on any thread.
    func dashboardJSON(_ completion: @escaping @Sendable (String) -> Void)
}

/// The admin listener (docs/operations.md): `/healthz`, `/readyz`, `/metrics`, `/dashboard`, `/dashboard.json`. It runs on the first loop; one request
/// per connection, answered and closed.
final class AdminListener: EventHandler, @unchecked Sendable {
    let fd: Int32
    let loop: EventLoop
    let state: AdminState
    /// Pauses accepting when descriptors run out (the main listeners log the episode).
    private let gate: ListenerGate

    init(fd: Int32, loop: EventLoop, state: AdminState) {
        self.fd = fd
        self.loop = loop
        self.state = state
        gate = ListenerGate(fd: fd, loop: loop)
        gate.handler = self
    }

    func handleEvent(_ events: UInt32) {
        var n = 0
        while n < 16, let (c, _) = gate.accept() {
            n += 1
            let conn = AdminConnection(fd: c, listener: self)
            do { try loop.register(c, conn) } catch { Socket.close(c); continue }
            conn.start()
        }
    }

    func close() { gate.close() }
}

final class AdminConnection: EventHandler {
    let fd: Int32
    let listener: AdminListener
    private let inBuf = IOBuffer(capacity: 1024)
    private let outBuf = IOBuffer(capacity: 1024)
    private var parser = HTTPRequestHeadParser(limits: HTTPParserLimits(maxHeadBytes: 8192, maxHeaders: 64))
    /// A complete request was read (the answer may still be in the making, e.g. a metrics scrape).
    private var answered = false
    private var responseQueued = false
    private var closed = false
    private lazy var timer = LoopTimer { [weak self] in self?.close() }

    init(fd: Int32, listener: AdminListener) {
        self.fd = fd
        self.listener = listener
    }

    func start() {
        listener.loop.schedule(timer, at: listener.loop.now + .nanoseconds(10))
        read()
    }

    func handleEvent(_ events: UInt32) {
        if closed { return }
        if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error | EventLoop.readHangup) != 0 { read() }
        if !closed && events & EventLoop.writable != 0 { flush() }
    }

    private func read() {
        while !closed && !answered {
            switch Socket.read(fd, into: inBuf, max: 4096) {
            case .processed:
                switch parser.parse(inBuf.readable) {
                case .needMore: continue
                case .failure(let e): respond(status: e.status, type: "application/json", body: "{\"error\":\"bad_request\"}", headOnly: false)
                case .complete(let head, _):
                    answered = true
                    route(head)
                }
            case .wouldBlock: return
            case .eof, .error: close(); return
            }
        }
    }

    private func route(_ head: HTTPRequestHead) {
        let path = head.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.target
        let headOnly = head.method == "HEAD"
        guard head.method == "GET" || headOnly else {
            respond(status: 405, type: "application/json", body: "{\"error\":\"method_not_allowed\"}", headOnly: false)
            return
        }
        switch path {
        case "/healthz":
            respond(status: 200, type: "application/json", body: "{\"status\":\"ok\"}", headOnly: headOnly)
        case "/readyz":
            let problems = listener.state.readinessProblems()
            if problems.isEmpty {
                respond(status: 200, type: "application/json", body: "{\"status\":\"ready\"}", headOnly: headOnly)
            } else {
                let list = problems.map { "\"\($0)\"" }.joined(separator: ",")
                respond(status: 503, type: "application/json", body: "{\"status\":\"not_ready\",\"missing\":[\(list)]}",
                        headOnly: headOnly)
            }
        case "/metrics":
            let loop = listener.loop
            let conn = LoopBound(self)
            listener.state.metricsText { text in
                loop.execute {
                    conn.value.respond(status: 200, type: "text/plain; version=0.0.4; charset=utf-8", body: text,
                                       headOnly: headOnly)
                }
            }
        case "/dashboard", "/dashboard.json":
            let loop = listener.loop
            let conn = LoopBound(self)
            let page = path == "/dashboard"
            listener.state.dashboardJSON { json in
                loop.execute {
                    conn.value.respond(status: 200,
                                       type: page ? "text/html; charset=utf-8" : "application/json",
                                       body: page ? DashboardPage.render(json: json) : json, headOnly: headOnly,
                                       extraHeaders: DashboardPage.headers)
                }
            }
        default:
            respond(status: 404, type: "application/json", body: "{\"error\":\"not_found\"}", headOnly: headOnly)
        }
    }

    private func respond(status: Int, type: String, body: String, headOnly: Bool, extraHeaders: String = "") {
        guard !closed else { return }
        answered = true
        responseQueued = true
        ResponseHeadWriter.writeStatusLine(status, into: outBuf)
        outBuf.append(ErrorResponse.reasonPhrase(status))
        outBuf.append("\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\(extraHeaders)Connection: close\r\n\r\n")
        if !headOnly { outBuf.append(body) }
        flush()
    }

    private func flush() {
        switch Socket.write(fd, from: outBuf) {
        case .processed, .wouldBlock: if responseQueued && outBuf.isEmpty { close() }
        case .eof, .error: close()
        }
    }

    private func close() {
        guard !closed else { return }
        closed = true
        listener.loop.cancel(timer)
        listener.loop.deregister(fd)
        Socket.close(fd)
    }
}

