import AndroidAttestation
import AppCheck
import KeySets
import Foundation
import Synchronization

/// Google's Android attestation status list (SPEC §10), fetched from one URL and kept as long as its `Cache-Control`
/// says, for every app that names that URL.
///
/// Fetched lazily by the exchange that finds it due (one fetch at a time; the others keep using the list they have),
/// so there is no thread and the clock is the service's. A failed fetch keeps the old list and is retried after
/// `retryAfter`. A list older than `maxAge` (24 h), or none at all, is not used: exchanges answer 503, fail closed.
final class AndroidStatusListCache: Sendable {
    /// The oldest list used: 24 h (SPEC §10).
    static let maxAge = 24.0 * 3600
    /// Refresh interval without a usable `max-age`, and the bounds put on one: 1 h, 1 min..24 h.
    static let defaultLifetime = 3600.0
    static let lifetimeRange = 60.0...maxAge
    /// Wait after a failed fetch: 1 min.
    static let retryAfter = 60.0
    /// Largest list accepted: 16 MiB (Google's is well under 1 MiB).
    static let maxBytes = 16 << 20

    private struct Snapshot: Sendable {
        var list: AndroidStatusList?
        var fetchedAt = 0.0
        var nextFetchAt = 0.0
        var lastError = ""
    }

    /// Where the list is fetched.
    let url: String
    private let client: BlockingGet
    private let snapshot = Mutex(Snapshot())
    /// Held for the whole of one fetch, so concurrent exchanges that find the list due fetch it once.
    private let fetching = Mutex(())

    init(url: String, timeout: Double = 10) {
        self.url = url
        client = BlockingGet(timeout: timeout, maxBodyBytes: Self.maxBytes)
    }

    /// The list to check against at `now`, fetching it first when due; `.failure` with the reason when there is
    /// none younger than `maxAge`. Blocks for at most one fetch: call it off the event loops.
    func list(now: Double) -> Result<AndroidStatusList, StaleList> {
        if snapshot.withLock({ now >= $0.nextFetchAt }) {
            fetching.withLock { _ in
                guard snapshot.withLock({ now >= $0.nextFetchAt }) else { return } // another caller just fetched it
                refresh(now: now)
            }
        }
        return snapshot.withLock { current in
            guard let list = current.list else {
                return .failure(StaleList(reason: "no status list yet: \(current.lastError)"))
            }
            guard now - current.fetchedAt <= Self.maxAge else {
                return .failure(StaleList(reason: "the status list is \(Int(now - current.fetchedAt)) s old: \(current.lastError)"))
            }
            return .success(list)
        }
    }

    /// Why no list may be used (for the log line).
    struct StaleList: Error, Sendable {
        let reason: String
    }

    private func refresh(now: Double) {
        let outcome: Result<(AndroidStatusList, Double), StaleList>
        do {
            let (body, cacheControl) = try client.get(url)
            if let list = Self.parse(body) {
                outcome = .success((list, Self.lifetime(cacheControl)))
            } else {
                outcome = .failure(StaleList(reason: "not a status list ({\"entries\": {…}})"))
            }
        } catch {
            outcome = .failure(StaleList(reason: error.description))
        }
        snapshot.withLock { current in
            switch outcome {
            case let .success((list, lifetime)):
                current = Snapshot(list: list, fetchedAt: now, nextFetchAt: now + lifetime, lastError: "")
            case let .failure(error):
                current.nextFetchAt = now + Self.retryAfter
                current.lastError = "\(url): \(error.reason)"
            }
        }
    }

    /// `max-age` of the `Cache-Control` values, within `lifetimeRange`; `defaultLifetime` without one.
    static func lifetime(_ cacheControl: [String]) -> Double {
        for value in cacheControl {
            for directive in value.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if parts.count == 2, parts[0].lowercased() == "max-age", let seconds = Double(parts[1]) {
                    return min(max(seconds, lifetimeRange.lowerBound), lifetimeRange.upperBound)
                }
            }
        }
        return defaultLifetime
    }

    /// `{"entries": {"<hex serial>": {"status": "REVOKED"|"SUSPENDED", …}, …}}`; entries with another status are
    /// ignored. `nil` when the document is not that shape.
    static func parse(_ body: [UInt8]) -> AndroidStatusList? {
        guard let document = try? StrictJSON.parse(body, maxDepth: 8, maxBytes: maxBytes),
              let entries = document.member("entries")?.objectMembers else { return nil }
        var refused: [String: AndroidStatusList.Status] = [:]
        for (serial, entry) in entries {
            guard let fields = entry.objectMembers else { return nil }
            guard let text = fields.first(where: { $0.key == "status" })?.value.stringValue,
                  let status = AndroidStatusList.Status(rawValue: text) else { continue }
            refused[serial] = status
        }
        return AndroidStatusList(entries: refused)
    }
}
