import Foundation

extension ConfigDecoder {
    static let routeKeys = [
        "name", "path", "prefix", "methods", "upstream", "enforcement", "replay_protection", "max_body_bytes",
        "forward_token", "cors_preflight", "providers", "max_risk", "require_risk", "websocket", "stream_idle_timeout",
        "dpop", "dpop_max_age",
    ]

    /// What the shadowing check needs to know of a route that has already been read.
    private struct SeenRoute {
        var name: String
        var match: RouteMatch
        var methods: [String]
        var namePosition: ConfigPosition
    }

    /// Routes in file order. Route names are unique; each needs exactly one of `path`/`prefix` and an existing
    /// upstream; a route that an earlier route fully covers (it could never match) is an error.
    func decodeRoutes(_ node: Node, upstreams: [UpstreamSettings], declaredUpstreams: Set<String>,
                      defaultMaxBody: Int64) -> [RouteSettings] {
        guard case let .sequence(sequence) = node else {
            error(node, "expected a list of routes for routes, got \(node.kindName)")
            return []
        }
        if sequence.isEmpty {
            error(node, "at least one route is required")
            return []
        }
        var routes: [RouteSettings] = []
        var seen: [SeenRoute] = []
        var names: [String: ConfigPosition] = [:]
        for (index, item) in sequence.enumerated() {
            guard let f = fields(item, "routes[\(index)]", known: Self.routeKeys) else { continue }
            let context: String
            var name: String?
            if let v = f.value("name"), let text = nonEmptyString(v, "routes[\(index)].name") {
                if let first = names[text] {
                    error(v, "duplicate route name '\(text)' (first at \(first))")
                } else {
                    name = text
                    names[text] = ConfigPosition(v)
                }
                context = "route '\(text)'"
            } else {
                if f.value("name") == nil { error(f.position, "missing required key 'name' in routes[\(index)]") }
                context = "routes[\(index)]"
            }

            var match: RouteMatch?
            var matchNode: Node?
            switch (f.value("path"), f.value("prefix")) {
            case (nil, nil):
                error(f.position, "\(context) needs one of 'path' (exact) or 'prefix'")
            case let (path?, prefix?):
                let later = ConfigPosition(path) < ConfigPosition(prefix) ? prefix : path
                error(later, "\(context) has both 'path' and 'prefix'; use exactly one")
            case let (path?, nil):
                matchNode = path
                match = routePath(path, "\(context) path").map(RouteMatch.exact)
            case let (nil, prefix?):
                matchNode = prefix
                match = routePath(prefix, "\(context) prefix").map(RouteMatch.prefix)
            }

            var methods: [String] = []
            if let v = f.value("methods"), let items = list(v, "\(context) methods") {
                for item in items {
                    guard let text = nonEmptyString(item, "a method of \(context)") else { continue }
                    let method = text.uppercased()
                    if !Self.isToken(method) {
                        error(item, "invalid HTTP method '\(text)' in \(context)")
                    } else if !methods.contains(method) {
                        methods.append(method)
                    }
                }
            }

            var upstreamIndex: Int?
            if let v = f.value("upstream") {
                if let text = string(v, "\(context) upstream") {
                    if let found = upstreams.firstIndex(where: { $0.name == text }) {
                        upstreamIndex = found
                    } else if !declaredUpstreams.contains(text) {
                        var message = "unknown upstream '\(text)' in \(context)"
                        if declaredUpstreams.isEmpty {
                            message += "; no upstreams are defined"
                        } else {
                            if let suggestion = Self.closest(to: text, among: Array(declaredUpstreams)) {
                                message += "; did you mean '\(suggestion)'?"
                            }
                            message += " (known upstreams: \(declaredUpstreams.sorted().joined(separator: ", ")))"
                        }
                        error(v, message)
                    }
                }
            } else {
                error(f.position, "missing required key 'upstream' in \(context)")
            }

            var enforcement = Enforcement.enforce
            if let v = f.value("enforcement"), let value = choice(v, "\(context) enforcement", [Enforcement.enforce, .monitor, .off]) {
                enforcement = value
            }
            var replayProtection = false
            if let v = f.value("replay_protection"), let value = bool(v, "\(context) replay_protection") {
                replayProtection = value
                if value && enforcement != .enforce {
                    error(v, "replay_protection: true requires enforcement: enforce (\(context) has enforcement: \(enforcement.rawValue))")
                }
            }
            var maxBody = defaultMaxBody
            if let v = f.value("max_body_bytes"), let n = size(v, "\(context) max_body_bytes", in: 0...Int64.max) {
                maxBody = n
            }
            var forwardToken = false
            if let v = f.value("forward_token"), let value = bool(v, "\(context) forward_token") { forwardToken = value }
            var cors = CORSPreflight.bypass
            if let v = f.value("cors_preflight"), let value = choice(v, "\(context) cors_preflight", [CORSPreflight.bypass, .verify]) {
                cors = value
            }

            let providers = decodeProviders(f, context, enforcement: enforcement)
            let (websocket, streamIdle) = decodeStreams(f, context)
            let risk = decodeRouteRisk(f, context, enforcement: enforcement)
            let dpop = decodeRouteDPoP(f, context, enforcement: enforcement)

            if let match, let matchNode {
                if let shadow = seen.first(where: { Self.covers($0.match, $0.methods, match, methods) }) {
                    error(matchNode, "\(context) can never match: route '\(shadow.name)' at \(shadow.namePosition) comes first and matches every request it would (first match wins)")
                }
                seen.append(SeenRoute(name: name ?? context, match: match, methods: methods,
                                      namePosition: f.keyPosition("name") ?? f.position))
            }

            guard let name, let match, let upstreamIndex else { continue }
            var route = RouteSettings(name: name, match: match, upstreamIndex: upstreamIndex, maxBodyBytes: maxBody)
            route.methods = methods
            route.enforcement = enforcement
            route.replayProtection = replayProtection
            route.forwardToken = forwardToken
            route.corsPreflight = cors
            route.providers = providers
            (route.maxRisk, route.requireRisk) = risk
            route.websocket = websocket
            route.streamIdleTimeout = streamIdle
            (route.dpop, route.dpopMaxAge) = dpop
            if let matchNode { warnGRPCOnHTTP1(route, matchNode, context, upstreams[upstreamIndex]) }
            routes.append(route)
        }
        return routes
    }

    /// The `provider` claim values a route may list (`unspecified`: a token without the claim, as Firebase's).
    static let providerNames = ["app_attest", "android_key", "device_check", "play_integrity", "recaptcha_v3", "recaptcha_enterprise",
                                "debug", "custom", "unspecified"]

    /// `providers: [app_attest, …]` (docs/configuration.md step 7): admit only tokens whose `provider` claim is listed.
    private func decodeProviders(_ f: ConfigFields, _ context: String, enforcement: Enforcement) -> Set<String> {
        guard let v = f.value("providers"), let items = list(v, "\(context) providers") else { return [] }
        if enforcement == .off {
            error(v, "\(context) providers has no effect with enforcement: off (no token is examined)")
            return []
        }
        if items.isEmpty { error(v, "\(context) providers must list at least one provider, or be left out") }
        var providers: Set<String> = []
        for item in items {
            guard let name = string(item, "\(context) providers") else { continue }
            guard Self.providerNames.contains(name) else {
                error(item, "invalid provider '\(name)' in \(context) providers: expected \(Self.providerNames.joined(separator: ", ").replacingLastComma())")
                continue
            }
            if !providers.insert(name).inserted { error(item, "\(context) providers lists \(name) twice") }
            providerMentions.append((context, name, ConfigPosition(item)))
        }
        return providers
    }

    /// A route path or prefix: starts with `/`, no query, fragment or whitespace.
    private func routePath(_ node: Node, _ what: String) -> String? {
        guard let text = string(node, what) else { return nil }
        if !text.hasPrefix("/") {
            error(node, "\(what) must start with '/', got '\(text)'")
        } else if text.contains(where: { $0 == "?" || $0 == "#" || $0.isWhitespace }) {
            error(node, "\(what) must not contain '?', '#' or spaces, got '\(text)'")
        } else {
            return text
        }
        return nil
    }

    /// True when the earlier route matches every request the later one would. Deliberately conservative, so
    /// it holds whether the router treats prefixes as plain string prefixes or as whole path segments: a prefix
    /// covers a path only when it ends in `/` (or is equal to it).
    static func covers(_ earlier: RouteMatch, _ earlierMethods: [String],
                       _ later: RouteMatch, _ laterMethods: [String]) -> Bool {
        let methodsCovered = earlierMethods.isEmpty
            || (!laterMethods.isEmpty && laterMethods.allSatisfy(earlierMethods.contains))
        guard methodsCovered else { return false }
        switch (earlier, later) {
        case let (.exact(a), .exact(b)):
            return a == b
        case (.exact, .prefix):
            return false
        case let (.prefix(p), .exact(x)), let (.prefix(p), .prefix(x)):
            return x == p || (p.hasSuffix("/") && x.hasPrefix(p))
        }
    }
}
