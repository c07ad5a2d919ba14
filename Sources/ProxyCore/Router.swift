import GatewayConfig

/// Picks the route for a request: the first route in file order whose path matches (exact `path`, or
/// `prefix`) and whose `methods` (when set) contain the method. Hands out the runtime's own `CompiledRoute`
/// instances: the same request on the same configuration gets the same reference.
public struct Router: Sendable {
    public let routes: [CompiledRoute]

    public init(routes: [CompiledRoute]) { self.routes = routes }

    @inlinable
    public func match(method: String, path: String) -> CompiledRoute? {
        for route in routes {
            switch route.match {
            case .exact(let p): if path != p { continue }
            case .prefix(let p): if !path.hasPrefix(p) { continue }
            }
            if !route.methods.isEmpty && !route.methods.contains(method) { continue }
            return route
        }
        return nil
    }
}
