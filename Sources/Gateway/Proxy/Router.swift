import GatewayConfig

/// Picks the route for a request: the first route in file order whose path matches (exact `path`, or
/// `prefix`) and whose `methods` (when set) contain the method.
struct Router: Sendable {
    let routes: [RouteSettings]

    func match(method: String, path: String) -> Int? {
        // By index, reading each route's fields in place: iterating the values copied every `RouteSettings` (a retain
        // per reference-counted field) on every request.
        for i in routes.indices {
            switch routes[i].match {
            case .exact(let p): if path != p { continue }
            case .prefix(let p): if !path.hasPrefix(p) { continue }
            }
            if !routes[i].methods.isEmpty && !routes[i].methods.contains(method) { continue }
            return i
        }
        return nil
    }
}
