import GatewayConfig

/// `ConfigErrorTableTests` rows: the top level, `app_check:`, `replay:`, `upstreams:` and `dashboard:`.
extension ConfigErrorTable {
    /// `upstreams` and `routes` (7 lines), to follow an `app_check` written by the case.
    static let afterAppCheck = upstreamsYAML + routesYAML

    static let appCheck: [ConfigErrorCase] = [
        // The top level.
        bad("- a\n- b\n", 1, 1, "expected a mapping for the top level, got a list"),
        bad(afterAppCheck, 1, 1, "missing required key 'app_check' (at least app_check.project_number)"),
        bad(appCheckYAML + upstreamsYAML + "routes:\n", 6, 1, "missing required key 'routes': at least one route is required"),
        bad("app_check:\n  project_number: \"1\"\n  jwks:\n    url: none\n" + afterAppCheck, 4, 10,
            "app_check.jwks.url is none but there is no issuer: section and no app_check.trusted_issuers: no key set could ever verify a token"),
        // app_check.
        bad("app_check:\n  project_number: my-project\n" + afterAppCheck, 2, 19,
            "app_check.project_number must be all digits (the project number, not the project ID), got 'my-project'"),
        bad("app_check:\n  project_id: demo\n" + afterAppCheck, 2, 3, "missing required key 'project_number' in app_check"),
        bad("app_check:\n  project_number:\n" + afterAppCheck, 2, 3, "missing required key 'project_number' in app_check"),
        bad(appCheckYAML + "  project_id: my project\n" + afterAppCheck, 3, 15,
            "invalid app_check.project_id 'my project': no spaces or '/' (it is the ID, e.g. my-project)"),
        bad(appCheckYAML + "  app_ids: [\"\"]\n" + afterAppCheck, 3, 13, "an entry of app_check.app_ids must not be empty"),
        bad(appCheckYAML + "  token_cache_size: -1\n" + afterAppCheck, 3, 21, "app_check.token_cache_size must be at least 0, got -1"),
        bad(appCheckYAML + "  outdated_client:\n    header: User Agent\n    pattern: x\n" + afterAppCheck, 4, 13,
            "invalid header name 'User Agent' for app_check.outdated_client.header"),
        bad(appCheckYAML + "  outdated_client:\n    pattern: x\n" + afterAppCheck, 4, 5,
            "missing required key 'header' in app_check.outdated_client"),
        bad(appCheckYAML + "  outdated_client:\n    header: User-Agent\n    pattern: \"(\"\n" + afterAppCheck, 5, 14,
            "invalid regular expression '(' for app_check.outdated_client.pattern"),
        bad(appCheckYAML + "  outdated_client:\n    header: User-Agent\n" + afterAppCheck, 4, 5,
            "missing required key 'pattern' in app_check.outdated_client"),
        bad(appCheckYAML + "  jwks:\n    url: file://\n" + afterAppCheck, 4, 10,
            "app_check.jwks.url 'file://' needs a path, e.g. file:///etc/jwks.json"),
        bad(appCheckYAML + "  jwks:\n    url: https:///jwks\n" + afterAppCheck, 4, 10,
            "invalid app_check.jwks.url 'https:///jwks': expected a URL with a host"),
        bad(appCheckYAML + "  jwks:\n    url: ftp://x/jwks\n" + afterAppCheck, 4, 10,
            "app_check.jwks.url must start with https://, http:// or file://, got 'ftp://x/jwks'"),
        bad(appCheckYAML + "  jwks:\n    url: none\n    cache_file: /tmp/jwks.json\n"
            + "  trusted_issuers:\n    - iss: https://o.example/1\n      jwks_url: https://o.example/jwks\n" + afterAppCheck, 5, 17,
            "app_check.jwks.cache_file has nothing to cache: app_check.jwks.url is none"),
        // app_check.trusted_issuers.
        bad(appCheckYAML + "  trusted_issuers: https://o.example/1\n" + afterAppCheck, 3, 20,
            "expected a mapping for app_check.trusted_issuers[0], got a scalar"),
        bad(appCheckYAML + "  trusted_issuers:\n    - iss: https://firebaseappcheck.googleapis.com/123\n      jwks_url: https://x/jwks\n"
            + afterAppCheck, 4, 12, "app_check.trusted_issuers[0].iss is Firebase's issuer, which app_check.jwks already covers"),
        bad(appCheckYAML + "  trusted_issuers:\n    - iss: https://o.example/1\n      jwks_url: https://o.example/jwks\n"
            + "    - iss: https://o.example/1\n      jwks_url: https://o.example/jwks\n" + afterAppCheck, 6, 12,
            "app_check.trusted_issuers[1].iss 'https://o.example/1' is listed twice"),
        bad(appCheckYAML + "  trusted_issuers:\n    - jwks_url: https://o.example/jwks\n" + afterAppCheck, 4, 7,
            "missing required key 'iss' in app_check.trusted_issuers[0]"),
        bad(appCheckYAML + "  trusted_issuers:\n    - iss: https://o.example/1\n      jwks_url: ftp://x\n" + afterAppCheck, 5, 17,
            "app_check.trusted_issuers[0].jwks_url must start with https://, http:// or file://, got 'ftp://x'"),
        bad(appCheckYAML + "  trusted_issuers:\n    - iss: https://o.example/1\n" + afterAppCheck, 4, 7,
            "missing required key 'jwks_url' in app_check.trusted_issuers[0]"),
    ]

    /// `replay.redis_url: "URL"` (the value at 2:14) and the message `RedisEndpoint.parse` gives for it.
    static func redis(_ url: String, _ problem: String) -> ConfigErrorCase {
        bad("replay:\n  redis_url: \"\(url)\"\n" + tail, 2, 14, "replay.redis_url: \(problem)")
    }

    static let replay: [ConfigErrorCase] = [
        bad("replay:\n  sqlite_path: \"\"\n" + tail, 2, 16, "replay.sqlite_path must not be empty"),
        redis("rediss://h?ca_file=/no/such/ca.pem", "ca_file /no/such/ca.pem is not readable"),
        redis("http://h", "unknown scheme \"http\": expected redis://, rediss://, redis+cluster:// or rediss+cluster://"),
        redis("redis://h#x", "a fragment (#) is not supported"),
        redis("redis://h?db=1", "unknown query parameter \"db\" (only ca_file is supported)"),
        redis("redis://h?ca_file=/x", "ca_file needs a TLS scheme (rediss:// or rediss+cluster://)"),
        redis("rediss://h?ca_file=", "ca_file is empty or badly percent-encoded"),
        redis("redis://h/x", "database must be a number, got \"x\""),
        redis("redis+cluster://h:1/2", "a cluster has only database 0"),
        redis("redis://user@h", "credentials must be user:password@ or :password@"),
        redis("redis://u:%zz@h", "bad percent-encoding in credentials"),
        redis("redis://u:@h", "empty password"),
        redis("redis://a,b", "several hosts need redis+cluster://"),
        redis("redis://[::1", "unterminated [ in host"),
        redis("redis://[::1]x", "junk after ]"),
        redis("redis://:6379", "missing host"),
        redis("redis://h h", "bad host \"h h\""),
        redis("redis://h:0", "bad port \"0\" (1–65535)"),
    ]

    /// `upstreams.api.url: URL` (the value at 5:10), with the route to `api` after it.
    static func upstreamURL(_ url: String, _ problem: String) -> ConfigErrorCase {
        bad(appCheckYAML + "upstreams:\n  api:\n    url: \"\(url)\"\n" + routesYAML, 5, 10, "invalid upstreams.api.url '\(url)': \(problem)")
    }

    static let upstreams: [ConfigErrorCase] = [
        // A list where a mapping is expected: the route's upstream is then unknown too.
        bad(appCheckYAML + "upstreams: [api]\n" + routesYAML, 3, 12, "expected a mapping of name → upstream for upstreams, got a list", errors: 2),
        bad(appCheckYAML + "upstreams:\n  \"\": {url: http://127.0.0.1:3001}\n  api:\n    url: http://127.0.0.1:3000\n" + routesYAML, 4, 3,
            "upstream names must be non-empty strings"),
        upstreamURL("127.0.0.1:3000", "expected http://host[:port][/path] or https://…"),
        upstreamURL("ftp://h", "the scheme must be http:// or https://, not ftp://"),
        upstreamURL("http://h/?q", "a query or fragment is not allowed"),
        upstreamURL("http://u@h", "user info (user@) is not allowed"),
        upstreamURL("http:///x", "the host is missing"),
        upstreamURL("http://h/a b", "the path must not contain spaces"),
        upstreamURL("http://h:0", "port 0 is not a port an upstream can listen on"),
        bad(appCheckYAML + "upstreams:\n  api:\n    connect_timeout: 2s\n" + routesYAML, 5, 5, "missing required key 'url' in upstreams.api"),
        bad(appCheckYAML + upstreamsYAML + "    ca_file: /tmp/ca.pem\n" + routesYAML, 6, 14, "upstreams.api.ca_file applies only to https:// upstreams"),
        bad(appCheckYAML + upstreamsYAML + "    protocol: h3\n" + routesYAML, 6, 15,
            "invalid value 'h3' for upstreams.api.protocol: expected http1 or h2"),
    ]

    static let dashboard: [ConfigErrorCase] = [
        bad("dashboard:\n  ready_share: 1.5\n" + tail, 2, 16, "dashboard.ready_share must be a number between 0 and 1 (e.g. 0.99), got '1.5'"),
        bad("dashboard:\n  history_file: /tmp/\n" + tail, 2, 17, "dashboard.history_file must name a file, got the folder '/tmp/'"),
        bad("dashboard:\n  history_file: /no/such/folder/h.json\n" + tail, 2, 17,
            "dashboard.history_file: folder '/no/such/folder' does not exist"),
    ]
}
