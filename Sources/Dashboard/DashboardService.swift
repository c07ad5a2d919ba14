import Foundation
import GatewayConfig
import JSONLog
import KeySets
import ReplayStores
import Synchronization

/// One event loop's dashboard counts, as the service takes them: `take` runs on the loop's own thread, hands over the
/// loop's `DashboardTally` and leaves an empty one (the gateway's workers conform).
package protocol DashboardTallySource: Sendable {
    func takeDashboardTally(_ deliver: @escaping @Sendable (DashboardTally) -> Void)
}

/// Runs the enforcement dashboard for a server: owns the history, folds every loop's `DashboardTally` into it
/// once a minute (on its own thread) and before each dashboard answer, writes `dashboard.history_file` after
/// each minute's fold (off the loop threads), and builds `/dashboard.json`.
package final class DashboardService: @unchecked Sendable {
    /// What the server tells the dashboard about the replay store.
    package struct ReplayInfo: Sendable {
        var store: String
        var counters: ReplayCounters
        var problem: @Sendable () -> String?

        package init(store: String, counters: ReplayCounters, problem: @escaping @Sendable () -> String?) {
            self.store = store
            self.counters = counters
            self.problem = problem
        }
    }

    private let history: Mutex<DashboardHistory>
    private let clock: @Sendable () -> Double
    private let historyFile: String
    private let log: LogSink
    private let stopped = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()
    private let running = Mutex(false)
    /// The last write of the history file: when (unix seconds) and the error, if it failed.
    private let builder = DispatchQueue(label: "dashboard-json")
    private let lastWrite = Mutex<(at: Double?, error: String?)>((nil, nil))
    package let keySetStatus = Mutex<(@Sendable () -> KeySetStatus)?>(nil)
    package let replayInfo = Mutex<ReplayInfo?>(nil)
    /// The issuer's `exchanges` at a time (unix seconds), when `issuer:` is configured (`IssuerMetrics.exchanges(at:)`).
    package let issuerExchanges = Mutex<(@Sendable (_ now: Double) -> [[String: Any]])?>(nil)
    /// The issuer's `risk` block at a time (unix seconds), when `issuer:` is configured (`RiskMetrics.dashboard(at:)`).
    package let issuerRisk = Mutex<(@Sendable (_ now: Double) -> [String: Any])?>(nil)
    /// The kids the gateway's own issuer publishes (the first signs), when `issuer:` is configured.
    package let ownIssuerKids = Mutex<[String]?>(nil)

    /// Reads `historyFile` when set; a missing file is a first start, a bad one an ops log line and an empty
    /// history.
    package init(historyFile: String, log: LogSink, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        self.historyFile = historyFile
        self.log = log
        self.clock = clock
        var start = DashboardHistory()
        if !historyFile.isEmpty {
            switch DashboardHistoryFile.load(path: historyFile) {
            case .loaded(let h):
                start = h
                log.info("dashboard history loaded", [("file", .string(historyFile)), ("routes", .int(h.routes.count))])
            case .absent:
                log.info("dashboard history file not found; starting empty", [("file", .string(historyFile))])
            case .refused(let why):
                log.error("dashboard history file ignored; starting empty (it will be overwritten within a minute)",
                          [("file", .string(historyFile)), ("problem", .string(why))])
            }
        }
        history = Mutex(start)
    }

    /// Starts the once-a-minute fold (and file write) for `loops`.
    package func start(loops: [any DashboardTallySource]) {
        running.withLock { $0 = true }
        finished.enter()
        let thread = Thread { [self] in
            defer { finished.leave() }
            while true {
                let now = clock()
                let wait = 60 - now.truncatingRemainder(dividingBy: 60) + 0.2
                if stopped.wait(timeout: .now() + wait) == .success { return }
                let done = DispatchSemaphore(value: 0)
                fold(loops: loops) { done.signal() }
                _ = done.wait(timeout: .now() + 5)
                save()
            }
        }
        thread.name = "dashboard"
        thread.start()
    }

    /// Stops the minute thread, folds the loops' last counts in (the loops must still be running) and writes
    /// the history one last time.
    package func stop(loops: [any DashboardTallySource]) {
        guard running.withLock({ r -> Bool in defer { r = false }; return r }) else { return }
        stopped.signal()
        finished.wait()
        let done = DispatchSemaphore(value: 0)
        fold(loops: loops) { done.signal() }
        _ = done.wait(timeout: .now() + 2)
        save()
    }

    /// Takes every loop's tally (each on its own thread), folds their sum in, then calls `completion` on the
    /// last loop to answer.
    package func fold(loops: [any DashboardTallySource], completion: @escaping @Sendable () -> Void) {
        guard !loops.isEmpty else { return completion() }
        let pending = Mutex<(DashboardTally, Int)>((DashboardTally(), loops.count))
        for loop in loops {
            loop.takeDashboardTally { [self] tally in
                let total = pending.withLock { p -> DashboardTally? in
                    p.0.add(tally)
                    p.1 -= 1
                    return p.1 == 0 ? p.0 : nil
                }
                guard let total else { return }
                let now = clock()
                history.withLock { $0.fold(total, now: now) }
                completion()
            }
        }
    }

    /// Folds, then delivers `/dashboard.json` for `settings` on the dashboard's own serial queue: building it
    /// (series over a week of minutes per route) takes milliseconds that no event loop should spend. Not the
    /// global queue: its few threads may be blocked by other work in the process; and one build at a time
    /// bounds the CPU a flood of dashboard requests can take.
    package func json(loops: [any DashboardTallySource], settings: Settings,
                      completion: @escaping @Sendable (String) -> Void) {
        fold(loops: loops) { [self] in
            builder.async { completion(self.currentJSON(settings: settings)) }
        }
    }

    /// `/dashboard.json` from the history as it is now (no fold).
    package func currentJSON(settings: Settings) -> String {
        let now = clock()
        let snapshot = history.withLock { $0 }
        let write = lastWrite.withLock { $0 }
        return DashboardReport(history: snapshot, settings: settings, now: now,
                               keySet: keySetStatus.withLock { $0 }?(), replay: replayInfo.withLock { $0 },
                               issuerExchanges: issuerExchanges.withLock { $0 }, issuerRisk: issuerRisk.withLock { $0 },
                               ownIssuerKids: ownIssuerKids.withLock { $0 }, historyFile: historyFile,
                               lastWrite: write).json()
    }

    /// A copy of the history (tests).
    package var snapshot: DashboardHistory { history.withLock { $0 } }

    private func save() {
        guard !historyFile.isEmpty else { return }
        let copy = history.withLock { $0 }
        do {
            try DashboardHistoryFile.save(copy, path: historyFile)
            lastWrite.withLock { $0 = (clock(), nil) }
        } catch {
            let text = "\(error)"
            let repeated = lastWrite.withLock { w -> Bool in defer { w.error = text }; return w.error == text }
            // Once per distinct problem, not once a minute.
            if !repeated { log.error("dashboard history file not written", [("file", .string(historyFile)), ("error", .string(text))]) }
        }
    }
}
