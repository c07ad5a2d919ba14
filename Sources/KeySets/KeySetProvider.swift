import AppCheck
import CSystemShims
import Foundation
import Glibc
import JSONLog
import Synchronization

/// Fetches and refreshes the App Check key set (docs/behaviour.md) on one background thread of its own, so no event
/// loop ever blocks on DNS, TCP, TLS or a file, and hands each new `KeySetSnapshot` to its subscribers.
///
/// Policy:
/// - At `start()`: when `cache_file` is set, readable, parses, and is younger than `max_stale` (measured from
///   its modification time), it is served at once (`source == .cacheFile`, `lifetime` 0: how long the server
///   allowed it to be cached is not known, so it counts as stale from the start). Then a fresh fetch.
/// - Lifetime of a fetched set: see `KeySetLifetime` (`min(Cache-Control max-age, jwks.max_age)`; `no-store`,
///   `no-cache`, `max-age=0` → `min(unknown_kid_refresh_interval, max_age)`).
/// - Refresh at 85% of the lifetime (at least 0.5 s after the fetch), one fetch at a time.
/// - A failed fetch is retried after 1 s, doubling up to 60 s, and never later than one lifetime of the
///   current set. The last good set keeps serving until `fetchedAt + lifetime + max_stale`.
/// - `unknownKid(_:)` asks for an early refetch, at most once per `unknown_kid_refresh_interval`.
/// - After each successful network fetch the raw document is written to `cache_file` atomically; a failure
///   to write is a logged warning.
public final class KeySetProvider: @unchecked Sendable {
    /// Retry delays after failed fetches.
    struct RetryPolicy: Sendable {
        /// First delay, in seconds.
        var initial: Double = 1
        /// Largest delay, in seconds.
        var maximum: Double = 60
    }

    /// What the fetch thread and the status readers share.
    private struct State {
        var current: KeySetSnapshot?
        var successes = 0
        var failures = 0
        var lastError: String?
        var subscribers: [@Sendable (KeySetSnapshot) -> Void] = []
    }

    /// Refresh at this fraction of a set's lifetime.
    static let refreshFraction = 0.85
    /// Never refresh sooner than this after a fetch, in seconds (a tiny lifetime must not spin).
    static let minimumRefreshDelay = 0.5

    private let settings: JWKSSettings
    private let log: LogSink
    private let fetcher: @Sendable (String) throws -> FetchedResponse
    private let clock: @Sendable () -> Date
    private let retry: RetryPolicy
    private let cacheFile: KeySetCacheFile?
    /// Keeps P-256 (ES256) keys too: for custom-token backends (docs/issuer.md), never Firebase's set.
    private let acceptES256: Bool

    private let state = Mutex(State())
    /// Serialises delivery to subscribers, so a subscriber never receives an older snapshot after a newer one.
    private let delivery = NSLock()
    private let wakeFD: Int32
    private let started = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let exited = DispatchSemaphore(value: 0)
    /// Monotonic time of the last accepted unknown-kid request; 0 = never.
    private let lastKidRequest = Atomic<UInt64>(0)
    private let kidRequested = Atomic<Bool>(false)

    /// A provider for `settings`; nothing happens until `start()`.
    /// - Parameters:
    ///   - caFile: PEM CA bundle for an `https://` URL; `nil` = the system store.
    ///   - timeout: seconds for one whole fetch (connect, TLS, request, response). Default 10.
    ///   - acceptES256: keep P-256 keys beside RSA ones (custom-token backends only).
    public convenience init(settings: JWKSSettings, log: LogSink, caFile: String? = nil, timeout: Double = 10,
                            acceptES256: Bool = false) {
        let client = BlockingHTTPClient(timeout: timeout, maxBodyBytes: JWKSet.maxDocumentBytes, caFile: caFile)
        self.init(settings: settings, log: log, fetcher: { try client.get($0) }, acceptES256: acceptES256)
    }

    /// The testable form: the fetch function, clock and retry delays are injected.
    init(settings: JWKSSettings, log: LogSink, fetcher: @escaping @Sendable (String) throws -> FetchedResponse,
         clock: @escaping @Sendable () -> Date = { Date() }, retry: RetryPolicy = RetryPolicy(),
         acceptES256: Bool = false) {
        self.settings = settings
        self.acceptES256 = acceptES256
        self.log = log
        self.fetcher = fetcher
        self.clock = clock
        self.retry = retry
        cacheFile = settings.cacheFile.isEmpty ? nil : KeySetCacheFile(path: settings.cacheFile)
        wakeFD = CSystemShims_eventfd()
    }

    deinit {
        if wakeFD >= 0 { Glibc.close(wakeFD) }
    }

    // MARK: public API

    /// Loads the cache file (synchronously: a small local read), then starts the fetch thread, which fetches
    /// at once. Calling it again does nothing.
    public func start() {
        guard !started.exchange(true, ordering: .sequentiallyConsistent) else { return }
        loadCacheFile()
        let thread = Thread { [self] in
            self.run()
            self.exited.signal()
        }
        thread.name = "jwks-fetch"
        thread.stackSize = 1 << 20
        thread.start()
    }

    /// Ends the fetch thread and waits for it: at once when idle, or when the fetch in flight finishes
    /// (bounded by the fetch timeout). No subscriber is called after `stop()` returns.
    public func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        wake()
        if started.load(ordering: .sequentiallyConsistent) { exited.wait() }
    }

    /// A token carried a `kid` the current set lacks. Cheap and non-blocking (two atomics and an `eventfd`
    /// write), safe from any thread: at most one refetch per `unknown_kid_refresh_interval`, however many
    /// requests carry unknown kids.
    /// Returns true when this call started a refetch (the caller may wait for the next snapshot).
    @discardableResult
    public func unknownKid(_ kid: String) -> Bool {
        let now = CSystemShims_monotonic_ns()
        let last = lastKidRequest.load(ordering: .relaxed)
        let interval = UInt64(max(0, settings.unknownKidRefreshInterval) * 1e9)
        if last != 0 && now &- last < interval { return false }
        guard lastKidRequest.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged else { return false }
        kidRequested.store(true, ordering: .releasing)
        wake()
        return true
    }

    /// Registers `callback` for every new snapshot (called on the fetch thread) and calls it once at once with
    /// the current snapshot, if any. The callback must be quick (e.g. post into each loop) and must not call
    /// `subscribe`.
    public func subscribe(_ callback: @escaping @Sendable (KeySetSnapshot) -> Void) {
        delivery.lock()
        defer { delivery.unlock() }
        let current = state.withLock { s -> KeySetSnapshot? in
            s.subscribers.append(callback)
            return s.current
        }
        if let current { callback(current) }
    }

    /// The current snapshot (usable or not), for status pages and tests; loops use `subscribe`.
    public var current: KeySetSnapshot? { state.withLock { $0.current } }

    /// Whether a usable snapshot exists (docs/operations.md readiness).
    public var isReady: Bool { current?.usable(at: clock()) ?? false }

    /// The last fetch's error, `nil` after a success.
    public var lastError: String? { state.withLock { $0.lastError } }

    /// Everything `/metrics` and `/readyz` need.
    public var status: KeySetStatus {
        let now = clock()
        return state.withLock { s in
            KeySetStatus(isReady: s.current?.usable(at: now) ?? false, keyCount: s.current?.set.count ?? 0,
                         kids: s.current?.set.kids ?? [], ageSeconds: s.current?.age(at: now),
                         source: s.current?.source, isStale: s.current?.isStale(at: now) ?? false,
                         successfulFetches: s.successes, failedFetches: s.failures, lastError: s.lastError)
        }
    }

    // MARK: fetch thread

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    /// Sleeps until woken or `seconds` pass.
    private func sleep(_ seconds: Double) {
        var pfd = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
        let ms = Int32(min(max(0, (seconds * 1000).rounded(.up)), 60_000))
        if poll(&pfd, 1, ms) > 0 {
            var counter: UInt64 = 0
            _ = Glibc.read(wakeFD, &counter, 8)
        }
    }

    private func run() {
        var nextFetch: UInt64 = 0
        var lastFetchStart: UInt64 = 0
        var consecutiveFailures = 0
        while !stopped.load(ordering: .acquiring) {
            let now = CSystemShims_monotonic_ns()
            var trigger: String?
            if kidRequested.exchange(false, ordering: .acquiring) {
                // A request made while an older fetch was already under way still needs a fetch of its own.
                if lastKidRequest.load(ordering: .relaxed) >= lastFetchStart { trigger = "unknown_kid" }
            }
            if trigger == nil && now >= nextFetch {
                trigger = lastFetchStart == 0 ? "start" : consecutiveFailures > 0 ? "retry" : "refresh"
            }
            guard let trigger else {
                sleep(Double(nextFetch - now) / 1e9)
                continue
            }
            lastFetchStart = CSystemShims_monotonic_ns()
            let delay: Double
            if let lifetime = fetchOnce(trigger: trigger) {
                consecutiveFailures = 0
                delay = max(lifetime * Self.refreshFraction, Self.minimumRefreshDelay)
            } else {
                consecutiveFailures += 1
                delay = retryDelay(afterFailures: consecutiveFailures)
                logFailureConsequences(nextRetry: delay)
            }
            nextFetch = CSystemShims_monotonic_ns() &+ UInt64(delay * 1e9)
        }
    }

    /// `initial · 2^(n-1)`, at most `maximum`, and at most the current set's lifetime (when it has one).
    func retryDelay(afterFailures n: Int) -> Double {
        var delay = min(retry.initial * pow(2, Double(min(n - 1, 30))), retry.maximum)
        if let lifetime = current?.lifetime, lifetime > 0 { delay = min(delay, lifetime) }
        return max(delay, 0.01)
    }

    /// One fetch; the new set's lifetime on success, `nil` on failure.
    private func fetchOnce(trigger: String) -> Double? {
        let url = settings.url
        let started = CSystemShims_monotonic_ns()
        let response: FetchedResponse
        let set: JWKSet
        do {
            response = try fetcher(url)
            set = try JWKSet.parse(response.body, acceptES256: acceptES256)
        } catch {
            let text = (error as? FetchError)?.description ?? (error as? JWKSet.ParseError)?.description ?? "\(error)"
            state.withLock { $0.failures += 1; $0.lastError = text }
            log.error("jwks fetch failed", [("jwks.url", .string(url)), ("jwks.trigger", .string(trigger)),
                                            ("error", .string(text))])
            return nil
        }
        let lifetime = KeySetLifetime.seconds(cacheControl: response.headers.values("cache-control"), settings: settings)
        let snapshot = KeySetSnapshot(set: set, fetchedAt: clock(), lifetime: lifetime, maxStale: settings.maxStale,
                                      source: .network)
        state.withLock { $0.successes += 1; $0.lastError = nil }
        log.info("jwks fetched", [
            ("jwks.url", .string(url)), ("jwks.trigger", .string(trigger)), ("jwks.kids", .strings(set.kids)),
            ("jwks.key_count", .int(set.count)), ("jwks.skipped", .strings(set.skipped.map(\.description))),
            ("jwks.lifetime_s", .double(lifetime)),
            ("duration_ms", .double(Double(CSystemShims_monotonic_ns() - started) / 1e6)),
        ])
        publish(snapshot)
        if let cacheFile {
            do {
                try cacheFile.write(response.body)
            } catch {
                log.warning("jwks cache file not written", [("jwks.cache_file", .string(cacheFile.path)),
                                                            ("error", .string("\(error)"))])
            }
        }
        return lifetime
    }

    private func logFailureConsequences(nextRetry: Double) {
        let now = clock()
        guard let snapshot = current else {
            log.warning("no jwks key set yet; not ready", [("jwks.retry_in_s", .double(nextRetry))])
            return
        }
        if !snapshot.usable(at: now) {
            log.error("jwks key set stale beyond max_stale; enforce routes answer 503 jwks_unavailable", [
                ("jwks.age_s", .double(snapshot.age(at: now))), ("jwks.retry_in_s", .double(nextRetry)),
            ])
        } else if snapshot.isStale(at: now) {
            log.warning("using stale jwks key set", [
                ("jwks.age_s", .double(snapshot.age(at: now))), ("jwks.source", .string(snapshot.source.rawValue)),
                ("jwks.usable_for_s", .double(snapshot.unusableAt.timeIntervalSince(now))),
                ("jwks.retry_in_s", .double(nextRetry)),
            ])
        } else {
            log.warning("jwks refresh failed; current set still fresh", [
                ("jwks.fresh_for_s", .double(snapshot.expiresAt.timeIntervalSince(now))), ("jwks.retry_in_s", .double(nextRetry)),
            ])
        }
    }

    private func publish(_ snapshot: KeySetSnapshot) {
        delivery.lock()
        defer { delivery.unlock() }
        let subscribers = state.withLock { s -> [@Sendable (KeySetSnapshot) -> Void] in
            s.current = snapshot
            return s.subscribers
        }
        guard !stopped.load(ordering: .acquiring) else { return }
        for subscriber in subscribers { subscriber(snapshot) }
    }

    private func loadCacheFile() {
        guard let cacheFile else { return }
        let fields: [(String, LogValue)] = [("jwks.cache_file", .string(cacheFile.path))]
        do {
            guard let (bytes, modified) = try cacheFile.read() else {
                log.info("jwks cache file absent", fields)
                return
            }
            let set = try JWKSet.parse(bytes, acceptES256: acceptES256)
            let snapshot = KeySetSnapshot(set: set, fetchedAt: modified, lifetime: 0, maxStale: settings.maxStale,
                                          source: .cacheFile)
            let now = clock()
            guard snapshot.usable(at: now) else {
                log.warning("jwks cache file older than max_stale; ignored", fields + [("jwks.age_s", .double(snapshot.age(at: now)))])
                return
            }
            publish(snapshot)
            log.info("jwks cache file loaded", fields + [
                ("jwks.kids", .strings(set.kids)), ("jwks.key_count", .int(set.count)),
                ("jwks.age_s", .double(snapshot.age(at: now))),
                ("jwks.usable_for_s", .double(snapshot.unusableAt.timeIntervalSince(now))),
            ])
        } catch {
            let text = (error as? FetchError)?.description ?? (error as? JWKSet.ParseError)?.description ?? "\(error)"
            log.warning("jwks cache file unusable; ignored", fields + [("error", .string(text))])
        }
    }
}
