import AppCheck

/// A refused exchange, Google-style (docs/issuer.md): the response says only the category (`status`, `code`, a short
/// `message`); `rule` names exactly which rule failed and goes to the log line only.
public struct IssuerError: Error, Sendable, Equatable {
    /// The HTTP status: 400, 403, 404, 413, 429 or 503.
    public let code: Int
    /// `INVALID_ARGUMENT`, `PERMISSION_DENIED`, `NOT_FOUND`, `RESOURCE_EXHAUSTED` or `UNAVAILABLE`.
    public let status: String
    /// What the client is told; never names the failing rule beyond the category.
    public let message: String
    /// The failing rule, for logs and tests (`challenge_unknown`, `nonce_mismatch`, `body_not_json`, …).
    public let rule: String
    /// More for the log line only (Apple's reason text for a refused device token); empty when there is none.
    public var detail: String = ""

    public init(code: Int, status: String, message: String, rule: String, detail: String = "") {
        self.code = code
        self.status = status
        self.message = message
        self.rule = rule
        self.detail = detail
    }

    /// 400: bad JSON, base64 or field.
    public static func invalidArgument(_ rule: String, _ message: String) -> IssuerError {
        IssuerError(code: 400, status: "INVALID_ARGUMENT", message: message, rule: rule)
    }

    /// 403: the evidence was refused. The message is the same for every rule and every method (an App Attest
    /// attestation, a debug secret, a DeviceCheck or custom token), so it tells a guesser nothing.
    public static func permissionDenied(_ rule: String, detail: String = "") -> IssuerError {
        IssuerError(code: 403, status: "PERMISSION_DENIED", message: "The exchange was refused.", rule: rule,
                    detail: detail)
    }

    /// 404: unknown app or method.
    public static func notFound(_ rule: String, _ message: String) -> IssuerError {
        IssuerError(code: 404, status: "NOT_FOUND", message: message, rule: rule)
    }

    /// 413 (still `INVALID_ARGUMENT`, as Google answers oversized bodies).
    public static let bodyTooLarge = IssuerError(code: 413, status: "INVALID_ARGUMENT",
                                                 message: "The request body exceeds 64 KiB.", rule: "body_too_large")

    /// 429: past `max_exchanges_per_second`.
    public static let rateLimited = limited("rate_limited")

    /// 429 for one of the limits (docs/issuer.md, Limits): `rate_limited_address`, `rate_limited_app`,
    /// `rate_limited`, `debug_guesses_exhausted`, `challenge_address_full`.
    public static func limited(_ rule: String) -> IssuerError {
        IssuerError(code: 429, status: "RESOURCE_EXHAUSTED", message: "Too many exchanges; retry later.", rule: rule)
    }

    /// 503: the state store or Apple could not answer; nothing was minted.
    public static func unavailable(_ rule: String, detail: String = "") -> IssuerError {
        IssuerError(code: 503, status: "UNAVAILABLE", message: "The service is unavailable; retry later.", rule: rule,
                    detail: detail)
    }

    /// The label of `appcheck_issuer_exchanges_total{result}` for this refusal.
    public var metricResult: String {
        switch code {
        case 400, 413: "invalid_argument"
        case 403: "permission_denied"
        case 404: "not_found"
        case 429: "resource_exhausted"
        default: "unavailable"
        }
    }

    /// `{"error":{"code":N,"message":"…","status":"…"}}` and a newline (so `curl -i` output does not run on).
    public var body: [UInt8] {
        Array("{\"error\":{\"code\":\(code),\"message\":\(JSONText.quote(message)),\"status\":\"\(status)\"}}\n".utf8)
    }

    /// Seconds for `Retry-After` (RFC 9110 §10.2.3) on 429 and 503: 60 where the limit is counted per minute or
    /// the held challenges must expire first (`debug_guesses_exhausted`, `challenge_address_full`), else 1; nil for
    /// other statuses.
    public var retryAfter: Int? {
        switch code {
        case 429: ["debug_guesses_exhausted", "challenge_address_full"].contains(rule) ? 60 : 1
        case 503: 1
        default: nil
        }
    }
}
