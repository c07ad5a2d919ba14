/// Picks the route for a request: the first route in file order whose path matches (exact `path`, or
/// `prefix`) and whose `methods` (when set) contain the method.
struct Router: Sendable {
    let routes: [RouteSettings]

    func match(method: String, path: String) -> Int? {
        for (i, route) in routes.enumerated() {
            switch route.match {
            case .exact(let p): if path != p { continue }
            case .prefix(let p): if !path.hasPrefix(p) { continue }
            }
            if !route.methods.isEmpty && !route.methods.contains(method) { continue }
            return i
        }
        return nil
    }
}
