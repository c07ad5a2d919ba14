import AppCheck
import Foundation
import GatewayConfig
import Synchronization

/// The DPoP side of the exchange methods (SPEC §10 "Key-bound tokens", RFC 9449 §5): a `DPoP` header with a proof of
/// the exchange request (`htm` `POST`, `htu` the request's URI by the rule of SPEC §4.4, or the same method's URL
/// under `issuer_url`; no `ath`: there is no token yet) makes the minted token carry `cnf.jkt`, the proof key's
/// RFC 7638 thumbprint. An invalid proof is 400 `INVALID_ARGUMENT` (rule `dpop_<rule>`), nothing minted; an app with
/// `require_dpop: true` refuses exchanges without one (rule `dpop_required`). The challenge method ignores the header.
///
/// The proof's `jti` is not recorded here: every exchange already spends single-use evidence (a challenge, a custom
/// token, a device token) or a debug secret, and a replayed proof only binds a new token to the same key, which is
/// useless without that key.
public enum IssuerDPoP {
    /// The thumbprint the token being minted is bound to, set for the duration of one exchange call (the minting code
    /// reads it, so no exchange method needs a parameter for it).
    @TaskLocal public static var thumbprint: String?

    /// How old an exchange proof's `iat` may be, seconds.
    public static let maxAge = 60.0

    /// The thumbprint to bind to, nil for an unbound token. `proofs` are the values of the request's `DPoP` fields;
    /// `requests` the URIs the proof may name (the request's own first, then the one under `issuer_url`), each with
    /// `method` and no token.
    public static func binding(proofs: [[UInt8]], isExchange: Bool, requireDPoP: Bool, requests: [DPoPRequest],
                               now: Double) throws(IssuerError) -> String? {
        guard isExchange else { return nil }
        if proofs.isEmpty {
            if requireDPoP { throw .invalidArgument("dpop_required", "This app requires a DPoP proof.") }
            return nil
        }
        guard proofs.count == 1 else { throw .invalidArgument("dpop_malformed", "The DPoP proof is invalid.") }
        var firstRule: DPoPRule?
        for request in requests {
            switch DPoPVerifier.verify(proofs[0], request: request, now: now) {
            case .success(let proof): return proof.thumbprint
            case .failure(let rule):
                if firstRule == nil || firstRule == .htu { firstRule = rule }
            }
        }
        throw .invalidArgument("dpop_" + (firstRule ?? .htu).rawValue, "The DPoP proof is invalid.")
    }

    /// The exchange URIs a proof may name: the request's own (`scheme://authority` + `path`), and the same method's
    /// URL under `issuer_url` (`issuer_url` + the path after `base_path`).
    public static func requests(scheme: String, authority: String, path: String, settings: IssuerSettings,
                                clockSkew: Double) -> [DPoPRequest] {
        var out = [DPoPRequest(method: "POST", scheme: scheme, authority: authority, path: path, accessToken: nil,
                               thumbprint: nil, maxAge: maxAge, clockSkew: clockSkew)]
        if path.hasPrefix(settings.basePath) {
            let parts = IssuerURLParts(settings.issuerURL)
            if let schemeEnd = parts.origin.range(of: "://") {
                out.append(DPoPRequest(method: "POST", scheme: String(parts.origin[..<schemeEnd.lowerBound]),
                                       authority: String(parts.origin[schemeEnd.upperBound...]),
                                       path: parts.path + path.dropFirst(settings.basePath.count), accessToken: nil,
                                       thumbprint: nil, maxAge: maxAge, clockSkew: clockSkew))
            }
        }
        return out
    }

    /// The `cnf` member for a token being minted in this task: `,"cnf":{"jkt":"…"}`, or nothing.
    static var cnfMember: String {
        thumbprint.map { ",\"cnf\":{\"jkt\":\(JSONText.quote($0))}" } ?? ""
    }
}

/// `appcheck_issuer_bound_tokens_total{app_id,method}`: tokens minted bound to a DPoP key (SPEC §10), beside the
/// exchanges counted by `IssuerMetrics` (the bound share is this over `result="minted"`). Labels bounded as there.
package final class IssuerBoundCounter: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    package init() {}

    package func add(appId: String, method: String) {
        counts.withLock { $0[appId + "\n" + method, default: 0] += 1 }
    }

    /// (app_id, method, count), sorted.
    package var samples: [(appId: String, method: String, count: Int)] {
        counts.withLock { $0 }.sorted { $0.key < $1.key }.map { entry in
            let parts = entry.key.split(separator: "\n", omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "", entry.value)
        }
    }
}
