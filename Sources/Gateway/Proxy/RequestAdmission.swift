import ProxyCore
import HTTPWire

/// The checks every request passes before the App Check step, whatever its protocol: the request target
/// (docs/behaviour.md normalisation), built-in handlers (answered before routes), the route, a token in the URL
/// on a verifying route, and a declared body over the route's limit.
enum RequestAdmission {
    /// A refusal before or right after routing; `route` is set when a route matched (the request is logged and
    /// counted under it).
    struct Refusal {
        var status: Int
        var code: String
        var reason: String
        var path: String
        var route: CompiledRoute?
    }

    enum Outcome {
        case admitted(RequestTarget, CompiledRoute)
        case builtin(RequestTarget, BuiltinHandler)
        case refused(Refusal)
    }

    static func prepare(_ head: HTTPRequestHead, runtime: Runtime, builtins: [BuiltinHandler]) -> Outcome {
        let target: RequestTarget
        switch RequestTarget.parse(head.target) {
        case .success(let t): target = t
        case .failure(.invalid(let why)):
            return .refused(Refusal(status: 400, code: "bad_request", reason: why, path: "-"))
        }
        for handler in builtins where handler.matches(Substring(target.path)) {
            return .builtin(target, handler)
        }
        guard let route = runtime.router.match(method: head.method, path: target.path) else {
            return .refused(Refusal(status: 404, code: "no_route", reason: "no_route", path: target.path))
        }
        if route.verifies, let query = target.query, RequestTarget.queryHasToken(query) {
            return .refused(Refusal(status: 400, code: "app_check_token_in_url", reason: "token_in_url",
                                    path: target.path, route: route))
        }
        if case .contentLength(let n) = head.framing, n > route.maxBodyBytes {
            return .refused(Refusal(status: 413, code: "body_too_large", reason: "body_too_large", path: target.path,
                                    route: route))
        }
        return .admitted(target, route)
    }
}
