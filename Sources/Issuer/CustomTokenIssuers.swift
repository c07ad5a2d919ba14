import AppCheck
import Foundation
import GatewayConfig
import JSONLog
import KeySets

/// The backends `exchangeCustomToken` trusts (`issuer.custom_token_issuers`, docs/issuer.md): one key-set provider per
/// entry, fetched and refreshed with `app_check.jwks`'s timings like Firebase's set (`file://` allowed, no cache file),
/// holding RS256 and ES256 (P-256) keys.
///
/// A custom token passes when, in this order (the first failure is the rule in the log line):
/// 1. it is a compact JWS of at most `maxTokenBytes` with JSON header and payload (else 400 `custom_token_malformed`);
/// 2. `alg` is `RS256` or `ES256` and `kid` a string (else `custom_token_algorithm`), and the header has no `crit`
///    (RFC 7515 §4.1.11: no extension is understood here, so any is refused: `custom_token_crit`);
/// 3. `iss` names an entry (else `custom_token_issuer_unknown`), whose keys are fetched (right after start the
///    exchange waits up to 3 s for the first fetch; else 503 `custom_token_jwks_unavailable`) and hold `kid` for
///    that algorithm (else `custom_token_unknown_kid`, and an early refetch is asked for);
/// 4. the signature verifies (else `custom_token_bad_signature`);
/// 5. `aud` is the issuer's URL, or an array holding it (else `custom_token_wrong_audience`);
/// 6. `app_id`, or `sub` when it has none, is the app of the URL (else `custom_token_wrong_app`);
/// 7. `iat` and `exp` are numbers (else `custom_token_malformed`), `exp - iat` at most 300 s (else
///    `custom_token_lifetime_too_long`), `now < exp + clock_skew` (else `custom_token_expired`), `iat <= now +
///    clock_skew` (else `custom_token_issued_in_future`).
/// The service then records `usedRecord` until `exp + clock_skew`, so it is exchanged once whatever its encoding:
/// SHA-256 of the signing input and the decoded signature, an ES256 signature in its low-S form (so the malleable
/// twin (r, n − s) and any other base64url spelling of the same signature are the same record).
final class CustomTokenIssuers: Sendable {
    /// Largest custom token accepted, in bytes.
    static let maxTokenBytes = CustomToken.maxTokenBytes
    /// Largest `exp - iat`, in seconds.
    static let maxLifetime = CustomToken.maxLifetime

    private struct Entry: Sendable {
        let iss: String
        let provider: KeySetProvider
    }

    private let entries: [Entry]
    private let clockSkew: Double

    init(_ settings: [CustomTokenIssuerSettings], jwks: JWKSSettings, clockSkew: Double, log: LogSink) {
        entries = settings.map { entry in
            var timings = jwks
            timings.url = entry.jwksURL
            timings.cacheFile = ""
            return Entry(iss: entry.iss, provider: KeySetProvider(settings: timings, log: log, acceptES256: true))
        }
        self.clockSkew = clockSkew
    }

    var isEmpty: Bool { entries.isEmpty }

    /// Starts fetching every entry's key set (each on its own thread).
    func start() { for entry in entries { entry.provider.start() } }

    func stop() { for entry in entries { entry.provider.stop() } }

    /// How long an exchange waits for a backend's first key set (the seconds after start), polling.
    static let firstFetchWait = 3.0

    /// Checks `token` for `appId` at `now`; returns the time until which it must be remembered as used. Runs off
    /// the event loops: right after start it may wait up to `firstFetchWait` for the backend's first key set.
    func verify(_ token: String, appId: String, audience: String,
                now: Double) async throws(IssuerError) -> (rememberUntil: Double, usedRecord: [UInt8]) {
        let decoded = try CustomToken.decode(token)
        guard let iss = decoded.iss, let entry = entries.first(where: { $0.iss.utf8.elementsEqual(iss.utf8) }) else {
            throw .permissionDenied("custom_token_issuer_unknown")
        }
        if entry.provider.current == nil {
            let deadline = Date().addingTimeInterval(Self.firstFetchWait)
            while entry.provider.current == nil, entry.provider.status.failedFetches == 0, Date() < deadline {
                try? await Task.sleep(nanoseconds: 20_000_000)
            }
        }
        guard let snapshot = entry.provider.current, snapshot.usable(at: Date(timeIntervalSince1970: now)) else {
            throw .unavailable("custom_token_jwks_unavailable")
        }
        do {
            return try CustomToken.check(decoded, keys: snapshot.set, appId: appId, audience: audience, now: now,
                                         clockSkew: clockSkew)
        } catch {
            if error.rule == "custom_token_unknown_kid" { entry.provider.unknownKid(decoded.kid) }
            throw error
        }
    }
}
