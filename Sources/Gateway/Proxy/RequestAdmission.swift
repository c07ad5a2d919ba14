import HTTPWire

/// The checks every request gets before the App Check step, for HTTP/1.1 and HTTP/2 alike: the target
/// parses and normalises, a route matches, no token rides in the URL on a checked route, and a declared body
/// fits the route's limit.
enum RequestAdmission {
    /// A refusal before or right after routing; `exchange` is set when a route matched (it is logged and
    /// counted under that route).
    struct Refusal {
        var status: Int
        var code: String
        var reason: String
        var path: String
        var exchange: Exchange?
    }

    enum Outcome {
        case admitted(Exchange, RequestTarget, RouteSettings)
        case refused(Refusal)
    }

    static func prepare(_ head: HTTPRequestHead, runtime: Runtime, requestId: String, now: UInt64) -> Outcome {
        let target: RequestTarget
        switch RequestTarget.parse(head.target) {
        case .success(let t): target = t
        case .failure(.invalid(let why)):
            return .refused(Refusal(status: 400, code: "bad_request", reason: why, path: "-"))
        }
        guard let routeIndex = runtime.router.match(method: head.method, path: target.path) else {
            return .refused(Refusal(status: 404, code: "no_route", reason: "no_route", path: target.path))
        }
        let route = runtime.routes[routeIndex]
        let ex = Exchange(method: head.method, path: target.path, requestId: requestId, start: now,
                          routeIndex: routeIndex, routeName: route.name, maxBodyBytes: route.maxBodyBytes)
        ex.mode = route.enforcement.rawValue
        if route.enforcement != .off, let query = target.query, RequestTarget.queryHasToken(query) {
            return .refused(Refusal(status: 400, code: "app_check_token_in_url", reason: "token_in_url",
                                    path: target.path, exchange: ex))
        }
        switch head.framing {
        case .none:
            ex.requestBody = .none
        case .contentLength(let n):
            if n > route.maxBodyBytes {
                return .refused(Refusal(status: 413, code: "body_too_large", reason: "body_too_large",
                                        path: target.path, exchange: ex))
            }
            ex.requestBody = n == 0 ? .none : .length(remaining: n)
        case .chunked:
            ex.requestBody = .chunked(ChunkedDecoder(limits: runtime.parserLimits))
        }
        return .admitted(ex, target, route)
    }
}
