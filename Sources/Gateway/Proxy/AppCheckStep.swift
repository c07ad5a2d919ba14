import HTTPWire

/// The outcome of the App Check step: what to forward and log, and the refusal when there is one.
struct AppCheckDecision {
    var outcome: AppCheckOutcome
    var rejection: Rejection?
}

/// A refusal answered by the gateway itself.
struct Rejection {
    var status: Int
    var code: String
    var reason: String
    var retryAfter: Int? = nil
}

/// Applies a route's enforcement (SPEC §4.2 step 1 and §6): CORS preflight bypass, header presence,
/// duplicate and size checks. One per event loop.
final class AppCheckStep {
    static let maxTokenLength = 4096

    init() {}

    func evaluate(head: HTTPRequestHead, route: RouteSettings, routeIndex: Int, now: UInt64) -> AppCheckDecision {
        if route.enforcement == .off { return AppCheckDecision(outcome: .skipped) }
        if route.corsPreflight == .bypass && head.method == "OPTIONS"
            && head.headers.contains(lowercased: "origin")
            && head.headers.contains(lowercased: "access-control-request-method") {
            return AppCheckDecision(outcome: .skipped)
        }
        let indices = head.headers.indices(forLowercased: "x-firebase-appcheck")
        let failure: String
        if indices.isEmpty {
            failure = "missing"
        } else if indices.count > 1 {
            failure = "duplicate_header"
        } else {
            let length = head.headers.withValueBytes(at: indices[0]) { $0.count }
            if length == 0 { failure = "missing" } else if length > Self.maxTokenLength { failure = "too_large" } else {
                failure = "unsupported_verifier"
            }
        }
        return decide(route: route, reason: failure)
    }

    private func decide(route: RouteSettings, reason: String) -> AppCheckDecision {
        let missing = reason == "missing"
        let outcome = AppCheckOutcome(status: missing ? "missing" : "invalid",
                                      outcome: missing ? "unknown_origin" : "invalid", reason: reason)
        if route.enforcement == .monitor { return AppCheckDecision(outcome: outcome) }
        let code = missing ? "app_check_token_missing" : "app_check_token_invalid"
        return AppCheckDecision(outcome: outcome, rejection: Rejection(status: 401, code: code, reason: reason))
    }
}
