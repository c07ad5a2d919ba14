import AppCheck
import Foundation
import HTTPWire
import EventLoop
import Issuer

/// The issuer's REST surface (docs/issuer.md) as a built-in handler: `<base_path>/v1/…` is answered before routes,
/// through the same exchange as a proxied request. The work itself (state store round trips, X.509 and ECDSA checks,
/// calls to Apple) runs off the event loop in `IssuerService`; the answer hops back with the loop's `execute`.
/// One handler per event loop (it answers on its own loop).
public final class IssuerHandler: BuiltinHandler {
    public let name = "issuer"
    /// A body declared over the limit is refused before any byte is read; one that grows past it while read is
    /// refused then (both 413 in Google's error shape, `answer(.bodyTooLarge)`).
    public let maxBodyBytes = IssuerJSON.maxBodyBytes
    public let service: IssuerService
    package let metrics: IssuerMetrics
    private let loop: EventLoop
    private let basePath: String
    /// `<path of iss>/.well-known/openid-configuration`, which may lie outside the base path.
    private let discoveryPath: String?

    package init(service: IssuerService, metrics: IssuerMetrics, loop: EventLoop) {
        self.service = service
        self.metrics = metrics
        self.loop = loop
        basePath = service.settings.basePath
        discoveryPath = service.discoveryPath
    }

    public func matches(_ path: Substring) -> Bool {
        // `<base>/v1/` and everything under it; `<base>/v1` alone is no resource (404 NOT_FOUND from the service).
        (path.hasPrefix(basePath) && (path.count == basePath.count || path.dropFirst(basePath.count).hasPrefix("/")))
            || (discoveryPath.map { path == $0 } ?? false)
    }

    private func issuerPath(_ path: String) -> IssuerPath {
        IssuerPath.match(Substring(path), basePath: basePath, discoveryPath: discoveryPath) ?? .unknown(rule: "unknown_resource")
    }

    /// The issuer's cheap refusals (unknown app or method, rate limits, debug guesses) on the loop, before the body
    /// is read: a flood is answered without a hop to the issuer's executor.
    public func refuseEarly(method: String, path: String, declaredBodyBytes: Int, client: String) -> BuiltinResponse? {
        let issuerPath = issuerPath(path)
        guard let outcome = service.preflight(issuerPath, httpMethod: method, bodyCount: declaredBodyBytes,
                                              client: client) else { return nil }
        metrics.count(outcome, configuredApps: service.settings)
        return Self.response(outcome)
    }

    public func handle(_ request: BuiltinRequest, respond: @escaping (BuiltinResponse) -> Void) {
        let issuerPath = issuerPath(request.path)
        let (service, metrics, loop) = (service, metrics, loop)
        let (method, body, client) = (request.method, request.body, request.client)
        let binding = dpopBinding(request, issuerPath)
        let reply = LoopBound(respond)
        Task(executorPreference: IssuerExecutor.shared) {
            // `refuseEarly` admitted the call, and the exchange kept the body within `maxBodyBytes` while reading it.
            let outcome = await binding.run { await service.process(issuerPath, httpMethod: method, body: body, client: client) }
            metrics.count(outcome, configuredApps: service.settings, bound: binding.thumbprint != nil)
            let response = LoopBound(IssuerHandler.response(outcome))
            loop.execute { reply.value(response.value) }
        }
    }

    public func answer(_ refusal: BuiltinRefusal) -> BuiltinResponse? {
        let error: IssuerError
        var headers = [("Content-Type", "application/json")]
        switch refusal {
        case .bodyTooLarge:
            error = .bodyTooLarge
        case .bodyBudgetSpent:
            error = .unavailable("body_budget_spent")
            headers.append(("Retry-After", String(error.retryAfter ?? 1)))
        case .addressBodyBudgetSpent:
            error = .limited("body_budget_address")
            headers.append(("Retry-After", String(error.retryAfter ?? 1)))
        }
        metrics.count(.failure(error, appId: "", method: "unknown"), configuredApps: service.settings)
        return BuiltinResponse(status: error.code, headers: headers, body: error.body,
                               logFields: [("app_id", ""), ("method", ""), ("result", error.metricResult),
                                           ("rule", error.rule)])
    }

    public static func response(_ outcome: IssuerOutcome) -> BuiltinResponse {
        var headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        if outcome.headers.contains(where: { $0.0.lowercased() == "cache-control" }) { headers.removeLast() }
        headers += outcome.headers
        var fields = [("app_id", outcome.appId), ("method", outcome.method), ("result", outcome.result),
                      ("rule", outcome.rule)]
        if !outcome.detail.isEmpty { fields.append(("detail", outcome.detail)) }
        return BuiltinResponse(status: outcome.status, headers: headers, body: outcome.body, logFields: fields)
    }
}

/// The DPoP side of one issuer call (SPEC §10 "Key-bound tokens"): the thumbprint the minted token is bound to, or the
/// refusal of the proof, decided from the request before the call runs.
public struct IssuerBinding: Sendable {
    public var thumbprint: String?
    public var refusal: IssuerOutcome?

    /// The call with `IssuerDPoP.thumbprint` set for its duration (the minting code adds `cnf` from it), or the refusal.
    public func run(_ call: @Sendable () async -> IssuerOutcome) async -> IssuerOutcome {
        if let refusal { return refusal }
        guard let thumbprint else { return await call() }
        return await IssuerDPoP.$thumbprint.withValue(thumbprint) { await call() }
    }
}

extension IssuerHandler {
    /// The `DPoP` proof of an exchange method's request, checked on the loop (one signature verification): valid, the
    /// token will be bound; invalid, or missing for an app with `require_dpop`, the call is refused with 400.
    public func dpopBinding(_ request: BuiltinRequest, _ path: IssuerPath) -> IssuerBinding {
        guard case let .method(_, appId, method) = path else { return IssuerBinding() }
        let proofs = request.headers.indices(forLowercased: "dpop").map { Array(request.headers.valueSlice(at: $0)) }
        let input = DPoPRequest.split(target: request.target)
        let authority = input.authority ?? request.headers.firstValue(forLowercased: "host") ?? ""
        var scheme = request.scheme
        if request.peerTrusted, let forwarded = request.headers.firstValue(forLowercased: "x-forwarded-proto") {
            let first = forwarded.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if first == "http" || first == "https" { scheme = first ?? scheme }
        }
        let requests = IssuerDPoP.requests(scheme: scheme, authority: authority, path: input.path,
                                           settings: service.settings, clockSkew: AppCheckPolicy.defaultClockSkew)
        do {
            let thumbprint = try IssuerDPoP.binding(
                proofs: proofs, isExchange: method.rawValue.hasPrefix("exchange"),
                requireDPoP: service.settings.app(appId)?.requireDPoP ?? false, requests: requests,
                now: Date().timeIntervalSince1970)
            return IssuerBinding(thumbprint: thumbprint)
        } catch {
            return IssuerBinding(refusal: .failure(error, appId: appId, method: method.rawValue))
        }
    }
}
