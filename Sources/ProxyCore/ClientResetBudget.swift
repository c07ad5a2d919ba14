import Synchronization

/// Rapid Reset across connections (CVE-2023-44487, issue 15): nghttp2 limits stream resets per connection, so an
/// attacker resets a few hundred streams and reconnects. This budget counts the streams clients reset before their
/// response was complete, per client address and process-wide, over every connection and loop; when a token
/// bucket runs dry the connection that reset is closed with GOAWAY(ENHANCE_YOUR_CALM).
///
/// Normal clients reset rarely (a cancelled navigation or request): 100 per second per address with a burst of
/// 1,000, and 2,000 per second with a burst of 20,000 for the whole process, leave them untouched. At most
/// `maxAddresses` addresses are tracked; when full, addresses whose bucket has refilled are forgotten, and an
/// address that still finds no room is held to the process-wide budget only.
public final class ClientResetBudget: Sendable {
    public struct Limits: Sendable {
        public var perAddressBurst = 1_000.0
        public var perAddressPerSecond = 100.0
        public var globalBurst = 20_000.0
        public var globalPerSecond = 2_000.0
        public var maxAddresses = 10_000

        public init() {}
    }

    /// A token bucket on a monotonic clock in nanoseconds.
    public struct Bucket: Sendable {
        public var tokens: Double
        public var last: UInt64

        /// Refills at `perSecond` up to `burst`, then takes one token; false when none was left.
        public mutating func take(now: UInt64, burst: Double, perSecond: Double) -> Bool {
            refill(now: now, burst: burst, perSecond: perSecond)
            guard tokens >= 1 else { return false }
            tokens -= 1
            return true
        }

        public mutating func refill(now: UInt64, burst: Double, perSecond: Double) {
            if now > last {
                tokens = min(burst, tokens + Double(now - last) / 1e9 * perSecond)
                last = now
            }
        }
    }

    private struct State {
        public var global: Bucket
        public var addresses: [String: Bucket] = [:]
    }

    public let limits: Limits
    private let state: Mutex<State>

    public init(limits: Limits = Limits(), now: UInt64) {
        self.limits = limits
        state = Mutex(State(global: Bucket(tokens: limits.globalBurst, last: now)))
    }

    /// One stream reset by a client at `address`; nil when within budget, else the reason the connection is closed
    /// (`rapid_reset_address` or `rapid_reset_global`, a label of `gateway_h2_protocol_closes_total`).
    public func spend(address: String, now: UInt64) -> String? {
        let l = limits
        return state.withLock { s -> String? in
            if s.addresses[address] == nil {
                if s.addresses.count >= l.maxAddresses {
                    s.addresses = s.addresses.filter { _, bucket in
                        var b = bucket
                        b.refill(now: now, burst: l.perAddressBurst, perSecond: l.perAddressPerSecond)
                        return b.tokens < l.perAddressBurst
                    }
                }
                if s.addresses.count < l.maxAddresses {
                    s.addresses[address] = Bucket(tokens: l.perAddressBurst, last: now)
                }
            }
            if s.addresses[address]?.take(now: now, burst: l.perAddressBurst, perSecond: l.perAddressPerSecond) == false {
                return "rapid_reset_address"
            }
            if !s.global.take(now: now, burst: l.globalBurst, perSecond: l.globalPerSecond) { return "rapid_reset_global" }
            return nil
        }
    }

    /// Addresses tracked now (tests).
    public var trackedAddresses: Int { state.withLock { $0.addresses.count } }
}
