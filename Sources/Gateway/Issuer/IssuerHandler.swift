import EventLoop

/// The issuer's REST surface (docs/issuer.md) as a built-in handler: `<base_path>/v1/…` is answered before routes,
/// through the same exchange as a proxied request. The work itself (state store round trips, X.509 and ECDSA checks,
/// calls to Apple) runs off the event loop in `IssuerService`; the answer hops back with the loop's `execute`.
/// One handler per event loop (it answers on its own loop).
final class IssuerHandler: BuiltinHandler {
    let name = "issuer"
    /// One byte over the issuer's limit still reaches the service, which answers 413 in Google's error shape;
    /// a declared length past it is refused by the exchange with `bodyTooLarge()` before any byte is read.
    let maxBodyBytes = IssuerJSON.maxBodyBytes + 1
    let service: IssuerService
    let metrics: IssuerMetrics
    private let loop: EventLoop
    private let basePath: String

    init(service: IssuerService, metrics: IssuerMetrics, loop: EventLoop) {
        self.service = service
        self.metrics = metrics
        self.loop = loop
        basePath = service.settings.basePath
    }

    func matches(_ path: Substring) -> Bool {
        // `<base>/v1/` and everything under it; `<base>/v1` alone is no resource (404 NOT_FOUND from the service).
        path.hasPrefix(basePath) && (path.count == basePath.count || path.dropFirst(basePath.count).hasPrefix("/"))
    }

    func handle(_ request: BuiltinRequest, respond: @escaping (BuiltinResponse) -> Void) {
        let issuerPath = IssuerPath.match(Substring(request.path), basePath: basePath) ?? .unknown(rule: "unknown_resource")
        Self.answer(issuerPath, method: request.method, body: request.body, service: service, metrics: metrics,
                    loop: loop, reply: Unchecked(respond))
    }

    private static func answer(_ path: IssuerPath, method: String, body: [UInt8], service: IssuerService,
                               metrics: IssuerMetrics, loop: EventLoop,
                               reply: Unchecked<(BuiltinResponse) -> Void>) {
        Task(executorPreference: IssuerExecutor.shared) {
            let outcome = await service.handle(path, httpMethod: method, body: body)
            metrics.count(outcome, configuredApps: service.settings)
            let response = Unchecked(response(outcome))
            loop.execute { reply.value(response.value) }
        }
    }

    func bodyTooLarge() -> BuiltinResponse? {
        let error = IssuerError.bodyTooLarge
        return BuiltinResponse(status: error.code, headers: [("Content-Type", "application/json")], body: error.body,
                               logFields: [("app_id", ""), ("method", ""), ("result", error.metricResult),
                                           ("rule", error.rule)])
    }

    static func response(_ outcome: IssuerOutcome) -> BuiltinResponse {
        var headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        if outcome.headers.contains(where: { $0.0.lowercased() == "cache-control" }) { headers.removeLast() }
        headers += outcome.headers
        var fields = [("app_id", outcome.appId), ("method", outcome.method), ("result", outcome.result),
                      ("rule", outcome.rule)]
        if !outcome.detail.isEmpty { fields.append(("detail", outcome.detail)) }
        return BuiltinResponse(status: outcome.status, headers: headers, body: outcome.body, logFields: fields)
    }
}
