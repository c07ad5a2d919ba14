import GatewayConfig

/// `ConfigErrorTableTests` rows: `routes:`.
extension ConfigErrorTable {
    /// `app_check` and `upstreams` (5 lines), then `routes:` at line 6 followed by `items` (the first at line 7).
    static func routeList(_ items: String) -> String { appCheckYAML + upstreamsYAML + "routes:\n" + items }

    /// One route `a` to `api` with prefix `/` (lines 7–9), then `more` from line 10.
    static func route(_ more: String) -> String { routeList("  - name: a\n    prefix: /\n    upstream: api\n" + more) }

    static let routes: [ConfigErrorCase] = [
        bad(appCheckYAML + upstreamsYAML + "routes: {a: 1}\n", 6, 9, "expected a list of routes for routes, got a mapping"),
        bad(appCheckYAML + upstreamsYAML + "routes: []\n", 6, 9, "at least one route is required"),
        bad(routeList("  - just-a-name\n"), 7, 5, "expected a mapping for routes[0], got a scalar"),
        bad(routeList("  - name: a\n    prefix: /a/\n    upstream: api\n  - name: a\n    prefix: /b/\n    upstream: api\n"), 10, 11,
            "duplicate route name 'a' (first at 7:11)"),
        bad(routeList("  - prefix: /\n    upstream: api\n"), 7, 5, "missing required key 'name' in routes[0]"),
        bad(routeList("  - name: a\n    upstream: api\n"), 7, 5, "route 'a' needs one of 'path' (exact) or 'prefix'"),
        bad(routeList("  - name: a\n    path: /x\n    prefix: /\n    upstream: api\n"), 9, 13,
            "route 'a' has both 'path' and 'prefix'; use exactly one"),
        bad(routeList("  - name: a\n    prefix: api\n    upstream: api\n"), 8, 13, "route 'a' prefix must start with '/', got 'api'"),
        bad(routeList("  - name: a\n    path: /a?b\n    upstream: api\n"), 8, 11,
            "route 'a' path must not contain '?', '#' or spaces, got '/a?b'"),
        bad(route("    methods: [\"GE T\"]\n"), 10, 15, "invalid HTTP method 'GE T' in route 'a'"),
        bad(appCheckYAML + "routes:\n  - name: a\n    prefix: /\n    upstream: api\n", 6, 15,
            "unknown upstream 'api' in route 'a'; no upstreams are defined"),
        bad(routeList("  - name: a\n    prefix: /\n    upstream: apj\n"), 9, 15,
            "unknown upstream 'apj' in route 'a'; did you mean 'api'? (known upstreams: api)"),
        bad(routeList("  - name: a\n    prefix: /\n    upstream: zzz\n"), 9, 15, "unknown upstream 'zzz' in route 'a' (known upstreams: api)"),
        // The list names every upstream written, also one whose own URL is refused (issue 39).
        bad(appCheckYAML + "upstreams:\n  api:\n    url: ftp://x\n" + "routes:\n  - name: a\n    prefix: /\n    upstream: apii\n",
            9, 15, "unknown upstream 'apii' in route 'a'; did you mean 'api'? (known upstreams: api)", errors: 2),
        bad(routeList("  - name: a\n    prefix: /\n"), 7, 5, "missing required key 'upstream' in route 'a'"),
        bad(route("    enforcement: monitor\n    replay_protection: true\n"), 11, 24,
            "replay_protection: true requires enforcement: enforce (route 'a' has enforcement: monitor)"),
        bad(route("    forward_token: maybe\n"), 10, 20, "invalid value 'maybe' for route 'a' forward_token: expected true or false"),
        // providers (docs/configuration.md step 7): an empty list would admit every provider, so it is refused.
        bad(route("    providers: []\n"), 10, 16, "route 'a' providers must list at least one provider, or be left out"),
        bad(route("    enforcement: off\n    providers: [debug]\n"), 11, 16,
            "route 'a' providers has no effect with enforcement: off (no token is examined)"),
        bad(route("    providers: [apple]\n"), 10, 17,
            "invalid provider 'apple' in route 'a' providers: expected app_attest, android_key, device_check, play_integrity, recaptcha_v3, recaptcha_enterprise, debug, custom or unspecified"),
        bad(route("    providers: [debug, debug]\n"), 10, 24, "route 'a' providers lists debug twice"),
        // Streams (SPEC §6.1).
        bad(route("    websocket: maybe\n"), 10, 16, "invalid value 'maybe' for route 'a' websocket: expected true or false"),
        bad(route("    stream_idle_timeout: soon\n"), 10, 26,
            "invalid duration 'soon' for route 'a' stream_idle_timeout: expected a number and a unit ms, s, m, h or d (e.g. 250ms, 30s, 1.5s)"),
        bad(route("    stream_idle_timeout: 0s\n"), 10, 26, "route 'a' stream_idle_timeout must be positive, got 0s"),
        bad(route("    stream_idle_timeout: 2d\n"), 10, 26, "route 'a' stream_idle_timeout must be between 1ms and 1d, got 2d"),
        // Shadowing: a route an earlier one covers can never match.
        bad(route("  - name: b\n    prefix: /x\n    upstream: api\n"), 11, 13,
            "route 'b' can never match: route 'a' at 7:5 comes first and matches every request it would (first match wins)"),
        // Risk.
        bad(route("    enforcement: off\n    max_risk: 5\n"), 11, 15, "route 'a' max_risk has no effect with enforcement: off (no token is examined)"),
        bad(route("    require_risk: true\n"), 10, 19, "route 'a' require_risk: true needs max_risk in the same route"),
        // With enforcement off, max_risk is refused too (the row above).
        bad(route("    enforcement: off\n    max_risk: 5\n    require_risk: true\n"), 12, 19,
            "route 'a' require_risk has no effect with enforcement: off (no token is examined)", errors: 2),
    ]
}
