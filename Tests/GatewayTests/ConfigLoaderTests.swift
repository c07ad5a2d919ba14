import Foundation
@testable import Gateway
@testable import GatewayConfig
import GatewayTools
import TestSupport
import Testing

// MARK: Fixtures

/// The smallest valid configuration; tests append or prepend the part they exercise.
private let minimalTail = ConfigFixture.minimal

private func makeLoad(_ yaml: String, environment: [String: String] = [:], cores: Int = 4)
    -> Result<Settings, ConfigErrors> {
    ConfigLoader.load(yaml: yaml, path: "gw.yaml", environment: environment, cores: cores)
}

private func makeSettings(_ yaml: String, environment: [String: String] = [:], cores: Int = 4,
                          sourceLocation: SourceLocation = #_sourceLocation) -> Settings? {
    switch makeLoad(yaml, environment: environment, cores: cores) {
    case let .success(settings): return settings
    case let .failure(errors):
        Issue.record("expected a valid config, got:\n\(errors)", sourceLocation: sourceLocation)
        return nil
    }
}

private func makeErrors(_ yaml: String, environment: [String: String] = [:],
                        sourceLocation: SourceLocation = #_sourceLocation) -> [ConfigError] {
    switch makeLoad(yaml, environment: environment) {
    case .success:
        Issue.record("expected errors, the config loaded", sourceLocation: sourceLocation)
        return []
    case let .failure(errors): return errors.errors
    }
}

/// Asserts that loading gives exactly one error, at `line:column`, whose message contains `fragment`.
private func expectSingleError(_ yaml: String, line: Int, column: Int, _ fragment: String,
                               environment: [String: String] = [:],
                               sourceLocation: SourceLocation = #_sourceLocation) {
    let errors = makeErrors(yaml, environment: environment, sourceLocation: sourceLocation)
    #expect(errors.count == 1, "\(errors)", sourceLocation: sourceLocation)
    guard let error = errors.first else { return }
    #expect(error.file == "gw.yaml", sourceLocation: sourceLocation)
    #expect((error.line, error.column) == (line, column), "\(error)", sourceLocation: sourceLocation)
    #expect(error.message.contains(fragment), "\(error)", sourceLocation: sourceLocation)
}

/// A directory with a real self-signed `cert.pem` (RSA 2048, SHA-256), its `key.pem` and `ca.pem`, made by
/// the `openssl` CLI; removed by the caller. `bits`/`digest` make certificates ATS refuses.
func makeTLSFiles(bits: Int = 2048, digest: String = "sha256") throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("config-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let cert = directory.appendingPathComponent("cert.pem").path, key = directory.appendingPathComponent("key.pem").path
    let r = try Run.command("openssl", ["req", "-x509", "-newkey", "rsa:\(bits)", "-nodes", "-keyout", key, "-out", cert,
                                        "-days", "30", "-subj", "/CN=localhost", "-\(digest)"])
    guard r.status == 0 else { throw HarnessError("openssl req failed: \(r.stderr)") }
    try FileManager.default.copyItem(atPath: cert, toPath: directory.appendingPathComponent("ca.pem").path)
    return directory
}

/// The full example configuration (every key of docs/configuration.md) verbatim, except the certificate and key paths, which must exist to load.
private let specExample = """
server:
  listen: ["0.0.0.0:8080"]            # plain HTTP/1.1 (and h2c with prior knowledge)
  tls:                                 # optional; HTTP/1.1 and HTTP/2 by ALPN
    listen: ["0.0.0.0:8443"]
    certificate: /etc/appcheck-gateway/tls/fullchain.pem
    private_key: /etc/appcheck-gateway/tls/privkey.pem
    min_version: "1.2"                 # "1.2" or "1.3"; below 1.2 is refused by design (ATS)
  admin_listen: "127.0.0.1:9901"       # /metrics /healthz /readyz; never on the public port
  threads: auto                        # event-loop threads; auto = number of cores
  limits:
    max_connections: 10000
    max_connections_per_address: 1000 # IPv4 /32, IPv6 /64; past it new connections from that address are closed at accept; 0 = off
    max_header_bytes: 16KiB            # request line + headers
    max_headers: 100
    max_body_bytes: 10MiB              # per route override: routes[].max_body_bytes
    header_timeout: 10s                # whole head must arrive within this
    idle_timeout: 60s                  # keep-alive idle
    shutdown_grace: 10s                # drain on SIGTERM
  trusted_proxies: []                  # CIDRs whose X-Forwarded-For is kept and appended to
  log_level: info                      # debug | info | warning | error

app_check:
  project_number: "123456789012"       # required
  project_id: "my-project"             # optional; if set, aud must contain it as well
  app_ids: []                          # optional allow-list of App IDs (the sub claim); empty = any
  jwks:
    url: https://firebaseappcheck.googleapis.com/v1/jwks   # also http:// and file://
    max_age: 6h                        # never cache longer; min(Cache-Control max-age, this)
    unknown_kid_refresh_interval: 60s  # at most one refetch per this on an unknown kid
    max_stale: 24h                     # keep serving the last good set this long when refresh fails
    cache_file: ""                     # optional: last good set persisted here, loaded at start
  clock_skew: 10s                      # tolerance for exp and iat
  token_cache_size: 100000             # verified tokens remembered until their exp (0 = off)
  outdated_client:                     # missing token + matches → outdated_client, else unknown_origin
    header: User-Agent
    pattern: "^MyApp/"                 # regular expression

replay:
  store: memory                        # memory | sqlite | redis
  sqlite_path: /var/lib/appcheck-gateway/replay.sqlite
  redis_url: redis://127.0.0.1:6379/0 # also rediss:// (TLS) and redis://user:pass@host
  key_prefix: "appcheck:replay:"
  timeout: 250ms                       # per store operation
  limited_use_max_ttl: 5m              # on replay routes, tokens living longer are session tokens: rejected

upstreams:
  api:
    url: http://127.0.0.1:3000         # http:// or https:// (verified with system CAs or ca_file)
    connect_timeout: 2s
    response_timeout: 30s              # until the response head arrives
    max_idle_connections: 64

routes:                                # first match wins, in file order
  - name: redeem
    path: /v1/redeem                   # exact path; or `prefix: /v1/`
    methods: [POST]                    # optional; default any
    upstream: api
    enforcement: enforce               # enforce | monitor | off
    replay_protection: true            # each token accepted once
  - name: public
    prefix: /
    upstream: api
    enforcement: monitor
"""

// MARK: The full example and defaults

@Test func specExampleLoadsWithItsValues() throws {
    let files = try makeTLSFiles()
    defer { try? FileManager.default.removeItem(at: files) }
    let cert = files.appendingPathComponent("cert.pem").path, key = files.appendingPathComponent("key.pem").path
    let yaml = specExample
        .replacingOccurrences(of: "/etc/appcheck-gateway/tls/fullchain.pem", with: cert)
        .replacingOccurrences(of: "/etc/appcheck-gateway/tls/privkey.pem", with: key)
    let settings = try #require(makeSettings(yaml, cores: 6))

    let server = settings.server
    #expect(server.listen == [HostPort(host: "0.0.0.0", port: 8080)])
    let tls = try #require(server.tls)
    #expect(tls.listen == [HostPort(host: "0.0.0.0", port: 8443)])
    #expect(tls.certificatePath == cert)
    #expect(tls.privateKeyPath == key)
    #expect(tls.minVersion == "1.2")
    #expect(server.adminListen == HostPort(host: "127.0.0.1", port: 9901))
    #expect(server.threads == 6)
    #expect(server.limits.maxConnections == 10_000)
    #expect(server.limits.maxConnectionsPerAddress == 1000)
    #expect(server.limits.maxHeaderBytes == 16 * 1024)
    #expect(server.limits.maxHeaders == 100)
    #expect(server.limits.maxBodyBytes == 10 * 1024 * 1024)
    #expect(server.limits.headerTimeout == 10)
    #expect(server.limits.idleTimeout == 60)
    #expect(server.limits.shutdownGrace == 10)
    #expect(server.trustedProxies.isEmpty)
    #expect(server.logLevel == .info)

    let appCheck = settings.appCheck
    #expect(appCheck.projectNumber == "123456789012")
    #expect(appCheck.projectId == "my-project")
    #expect(appCheck.appIds.isEmpty)
    #expect(appCheck.jwks.url == "https://firebaseappcheck.googleapis.com/v1/jwks")
    #expect(appCheck.jwks.maxAge == 6 * 3600)
    #expect(appCheck.jwks.unknownKidRefreshInterval == 60)
    #expect(appCheck.jwks.maxStale == 24 * 3600)
    #expect(appCheck.jwks.cacheFile == "")
    #expect(appCheck.clockSkew == 10)
    #expect(appCheck.tokenCacheSize == 100_000)
    #expect(appCheck.outdatedClient?.header == "User-Agent")
    #expect(appCheck.outdatedClient?.pattern == "^MyApp/")

    #expect(settings.replay.store == .memory)
    #expect(settings.replay.sqlitePath == "/var/lib/appcheck-gateway/replay.sqlite")
    #expect(settings.replay.redisURL == "redis://127.0.0.1:6379/0")
    #expect(settings.replay.keyPrefix == "appcheck:replay:")
    #expect(settings.replay.timeout == 0.25)
    #expect(settings.replay.limitedUseMaxTTL == 300)

    #expect(settings.upstreams.count == 1)
    let api = try #require(settings.upstreams.first)
    #expect((api.name, api.scheme, api.host, api.port, api.basePath) == ("api", "http", "127.0.0.1", 3000, ""))
    #expect((api.connectTimeout, api.responseTimeout, api.maxIdleConnections) == (2, 30, 64))
    #expect(api.caFile == nil)

    #expect(settings.routes.count == 2)
    let redeem = settings.routes[0], open = settings.routes[1]
    #expect(redeem.name == "redeem")
    #expect(redeem.match == .exact("/v1/redeem"))
    #expect(redeem.methods == ["POST"])
    #expect(redeem.upstreamIndex == 0)
    #expect(redeem.enforcement == .enforce)
    #expect(redeem.replayProtection)
    #expect(redeem.maxBodyBytes == 10 * 1024 * 1024)
    #expect(!redeem.forwardToken)
    #expect(redeem.corsPreflight == .bypass)
    #expect(open.name == "public")
    #expect(open.match == .prefix("/"))
    #expect(open.methods.isEmpty)
    #expect(open.enforcement == .monitor)
    #expect(!open.replayProtection)
    #expect(settings.sourcePath == "gw.yaml")
}

@Test func omittedKeysTakeTheirDefaults() throws {
    let settings = try #require(makeSettings(minimalTail, cores: 3))
    #expect(settings.server.listen == [HostPort(host: "0.0.0.0", port: 8080)])
    #expect(settings.server.tls == nil)
    #expect(settings.server.adminListen == HostPort(host: "127.0.0.1", port: 9901))
    #expect(settings.server.threads == 3, "threads defaults to auto = the cores argument")
    #expect(settings.server.limits.maxBodyBytes == 10 << 20)
    #expect(settings.server.limits.maxHeaderBytes == 16 << 10)
    #expect(settings.server.logLevel == .info)
    #expect(settings.appCheck.projectId == nil)
    #expect(settings.appCheck.clockSkew == 10)
    #expect(settings.appCheck.tokenCacheSize == 100_000)
    #expect(settings.appCheck.outdatedClient == nil)
    #expect(settings.appCheck.jwks.url == "https://firebaseappcheck.googleapis.com/v1/jwks")
    #expect(settings.replay.store == .memory)
    #expect(settings.replay.timeout == 0.25)
    let route = try #require(settings.routes.first)
    #expect(route.enforcement == .enforce)
    #expect(route.corsPreflight == .bypass)
    #expect(!route.forwardToken)
    #expect(!route.replayProtection)
    #expect(route.methods.isEmpty)
    #expect(route.maxBodyBytes == 10 << 20)
}

@Test func routeBodyLimitDefaultsToServerLimitAndCanBeOverridden() throws {
    let yaml = """
    server:
      limits:
        max_body_bytes: 1MB
    app_check:
      project_number: "1"
    upstreams:
      api: {url: "https://api.example.com/base/"}
    routes:
      - {name: upload, prefix: /upload/, upstream: api, max_body_bytes: 1GiB, methods: [put, Post], forward_token: true, cors_preflight: verify}
      - {name: rest, prefix: /, upstream: api, enforcement: "off"}
    """
    let settings = try #require(makeSettings(yaml))
    #expect(settings.server.limits.maxBodyBytes == 1_000_000)
    #expect(settings.routes[0].maxBodyBytes == 1 << 30)
    #expect(settings.routes[0].methods == ["PUT", "POST"])
    #expect(settings.routes[0].forwardToken)
    #expect(settings.routes[0].corsPreflight == .verify)
    #expect(settings.routes[1].maxBodyBytes == 1_000_000)
    #expect(settings.routes[1].enforcement == .off)
    let api = try #require(settings.upstreams.first)
    #expect((api.scheme, api.host, api.port, api.basePath) == ("https", "api.example.com", 443, "/base"))
}

// MARK: Environment

@Test func environmentVariablesAreExpandedWithAndWithoutDefault() throws {
    let yaml = """
    server:
      listen: ${LISTEN}
      admin_listen: "${ADMIN:-127.0.0.1:9911}"
    app_check:
      project_number: "${PROJECT_NUMBER}"
      project_id: pre-${PROJECT_ID:-fallback}-post
    replay:
      key_prefix: "p$${x}"
    upstreams:
      api:
        url: http://${UPSTREAM_HOST:-localhost}:3000
    routes:
      - {name: all, prefix: /, upstream: api}
    """
    let settings = try #require(makeSettings(yaml, environment: [
        "LISTEN": "127.0.0.1:0", "PROJECT_NUMBER": "42", "UPSTREAM_HOST": "",
    ]))
    #expect(settings.server.listen == [HostPort(host: "127.0.0.1", port: 0)])
    #expect(settings.server.adminListen == HostPort(host: "127.0.0.1", port: 9911))
    #expect(settings.appCheck.projectNumber == "42")
    #expect(settings.appCheck.projectId == "pre-fallback-post")
    #expect(settings.replay.keyPrefix == "p${x}", "$${ is the escape for a literal ${")
    #expect(settings.upstreams.first?.host == "localhost", "an empty variable takes the :- default")
}

@Test func unsetEnvironmentVariableIsAnErrorAtItsScalar() {
    let yaml = """
    app_check:
      project_number: "${PROJECT_NUMBER}"
    upstreams:
      api:
        url: http://127.0.0.1:3000
    routes:
      - {name: all, prefix: /, upstream: api}
    """
    expectSingleError(yaml, line: 2, column: 19, "environment variable 'PROJECT_NUMBER' is not set")
}

@Test func expansionRules() throws {
    #expect(try EnvironmentExpansion.expand("a${X}b${Y:-d}", environment: ["X": "1"]).get() == "a1bd")
    #expect(try EnvironmentExpansion.expand("$5 and $${HOME}", environment: [:]).get() == "$5 and ${HOME}")
    #expect(throws: ConfigValueFailure.self) { try EnvironmentExpansion.expand("${X", environment: ["X": "1"]).get() }
    #expect(throws: ConfigValueFailure.self) { try EnvironmentExpansion.expand("${1X}", environment: [:]).get() }
}

// MARK: One test per error kind, with its exact position

@Test func unknownKeySuggestsTheClosestKnownKey() {
    expectSingleError("server:\n  listn: [\"0.0.0.0:8080\"]\n" + minimalTail,
                      line: 2, column: 3, "unknown key 'listn' in server; did you mean 'listen'?")
}

/// Swapped neighbouring letters are one edit, so `ulr` under an upstream suggests `url` (issue 26), with the
/// error at the key's FILE:LINE:COLUMN; the same suggestion works in every section, since all read `fields`.
@Test func swappedLettersSuggestTheKnownKey() {
    let yaml = """
    app_check:
      project_number: "123456789012"
    upstreams:
      api:
        ulr: http://127.0.0.1:3000
    routes:
      - name: all
        prefix: /
        upstream: api
    """
    let errors = makeErrors(yaml)
    let typo = errors.first { $0.message.contains("'ulr'") }
    #expect(typo.map { "\($0)" } == "gw.yaml:5:5: unknown key 'ulr' in upstreams.api; did you mean 'url'?", "\(errors)")
    expectSingleError("server:\n  lsiten: [\"0.0.0.0:8080\"]\n" + minimalTail,
                      line: 2, column: 3, "unknown key 'lsiten' in server; did you mean 'listen'?")
    expectSingleError(minimalTail + "\n    enforcmeent: enforce\n", line: 10, column: 5,
                      "unknown key 'enforcmeent' in routes[0]; did you mean 'enforcement'?")
    #expect(ConfigDecoder.editDistance("ulr", "url") == 1)
    #expect(ConfigDecoder.editDistance("abcd", "badc") == 2)
    #expect(ConfigDecoder.editDistance("kitten", "sitting") == 3)
    #expect(ConfigDecoder.closest(to: "ulr", among: ["url", "connect_timeout", "ca_file"]) == "url")
    #expect(ConfigDecoder.closest(to: "zzzzzz", among: ["server", "routes"]) == nil)
}

@Test func unknownTopLevelKeyWithoutCloseMatchListsKnownKeys() {
    expectSingleError("zzzzzz: 1\n" + minimalTail, line: 1, column: 1, "unknown key 'zzzzzz' in the top level (known keys: server")
}

@Test func duplicateKeyIsReportedAtTheSecondOccurrenceAndLoadingContinues() {
    let yaml = """
    server:
      log_level: info
      log_level: debug
      threads: many
    """ + "\n" + minimalTail
    let errors = makeErrors(yaml)
    #expect(errors.count == 2, "\(errors)")
    #expect(errors.first.map { "\($0.line):\($0.column)" } == "3:3")
    #expect(errors.first?.message == "duplicate key 'log_level' (first at 2:3)")
    #expect(errors.last.map { "\($0.line):\($0.column)" } == "4:12", "errors after the duplicate are still found")
}

@Test func wrongTypeForThreads() {
    expectSingleError("server:\n  threads: many\n" + minimalTail,
                      line: 2, column: 12, "invalid value 'many' for server.threads: expected auto or a number")
}

@Test func bareNumberWhereAListenAddressIsExpected() {
    expectSingleError("server:\n  listen: 8080\n" + minimalTail,
                      line: 2, column: 11, "invalid address '8080' for server.listen: expected host:port (for every interface write 0.0.0.0:8080)")
}

@Test func mappingWhereAListIsExpected() {
    expectSingleError("server:\n  listen: {a: b}\n" + minimalTail, line: 2, column: 11, "expected a list for server.listen, got a mapping")
}

@Test func badDuration() {
    expectSingleError("server:\n  limits:\n    header_timeout: 10 seconds\n" + minimalTail,
                      line: 3, column: 21, "invalid duration '10 seconds' for server.limits.header_timeout")
}

@Test func zeroDurationWherePositiveIsRequired() {
    expectSingleError("replay:\n  timeout: 0ms\n" + minimalTail, line: 2, column: 12, "replay.timeout must be positive")
}

@Test func clockSkewAboveFiveMinutesIsRefused() {
    expectSingleError("app_check:\n  project_number: \"1\"\n  clock_skew: 6m\n" + minimalTail.split(separator: "\n").dropFirst(2).joined(separator: "\n"),
                      line: 3, column: 15, "app_check.clock_skew must be between 0ms and 5m")
}

@Test func maxConnectionsPerAddressDefaultsTo1000AndZeroTurnsItOff() throws {
    let defaults = try #require(makeSettings(minimalTail))
    #expect(defaults.server.limits.maxConnectionsPerAddress == 1000)
    let off = try #require(makeSettings("server:\n  limits:\n    max_connections_per_address: 0\n" + minimalTail))
    #expect(off.server.limits.maxConnectionsPerAddress == 0)
    let high = try #require(makeSettings("server:\n  limits:\n    max_connections_per_address: 10000000\n" + minimalTail))
    #expect(high.server.limits.maxConnectionsPerAddress == 10_000_000)
}

@Test func maxConnectionsPerAddressOutOfRangeIsAnErrorAtItsValue() {
    expectSingleError("server:\n  limits:\n    max_connections_per_address: 10000001\n" + minimalTail, line: 3, column: 34,
                      "server.limits.max_connections_per_address must be between 0 and 10000000, got 10000001")
    expectSingleError("server:\n  limits:\n    max_connections_per_address: -1\n" + minimalTail, line: 3, column: 34,
                      "server.limits.max_connections_per_address must be between 0 and 10000000, got -1")
    expectSingleError("server:\n  limits:\n    max_connections_per_address: lots\n" + minimalTail, line: 3, column: 34,
                      "invalid value 'lots' for server.limits.max_connections_per_address: expected a whole number")
}

@Test func badSize() {
    expectSingleError("server:\n  limits:\n    max_body_bytes: 10 MiBs\n" + minimalTail,
                      line: 3, column: 21, "invalid size '10 MiBs' for server.limits.max_body_bytes")
}

@Test func badCIDR() {
    expectSingleError("server:\n  trusted_proxies: [\"10.0.0.0/8\", \"10.0.0.0/33\"]\n" + minimalTail,
                      line: 2, column: 35, "invalid CIDR '10.0.0.0/33' in server.trusted_proxies: prefix length must be 0 to 32")
}

@Test func badUpstreamURLScheme() {
    let yaml = minimalTail.replacingOccurrences(of: "http://127.0.0.1:3000", with: "ftp://127.0.0.1")
    let errors = makeErrors(yaml)
    // The route then names an upstream that exists but is invalid: reported once, not twice.
    #expect(errors.count == 1, "\(errors)")
    #expect(errors.first.map { "\($0.line):\($0.column)" } == "5:10")
    #expect(errors.first?.message.contains("the scheme must be http:// or https://, not ftp://") == true)
}

@Test func badJWKSURLScheme() {
    expectSingleError("app_check:\n  project_number: \"1\"\n  jwks: {url: \"ftp://x/jwks\"}\n" + minimalTail.split(separator: "\n").dropFirst(2).joined(separator: "\n"),
                      line: 3, column: 15, "app_check.jwks.url must start with https://, http:// or file://")
}

@Test func badRedisURLScheme() {
    expectSingleError("replay:\n  store: redis\n  redis_url: http://cache:6379\n" + minimalTail,
                      line: 3, column: 14, "replay.redis_url: unknown scheme \"http\"")
}

@Test func missingProjectNumber() {
    let yaml = minimalTail.replacingOccurrences(of: "project_number: \"123456789012\"", with: "project_id: my-project")
    expectSingleError(yaml, line: 2, column: 3, "missing required key 'project_number' in app_check")
}

@Test func projectNumberMustBeDigits() {
    let yaml = minimalTail.replacingOccurrences(of: "\"123456789012\"", with: "my-project")
    expectSingleError(yaml, line: 2, column: 19, "app_check.project_number must be all digits")
}

@Test func unknownUpstreamReferenceListsKnownNames() {
    let yaml = minimalTail.replacingOccurrences(of: "upstream: api", with: "upstream: apx")
    expectSingleError(yaml, line: 9, column: 15, "unknown upstream 'apx' in route 'all'; did you mean 'api'? (known upstreams: api)")
}

@Test func replayProtectionRequiresEnforce() {
    let yaml = minimalTail + "\n    enforcement: monitor\n    replay_protection: true"
    expectSingleError(yaml, line: 11, column: 24, "replay_protection: true requires enforcement: enforce")
}

@Test func pathAndPrefixTogether() {
    let yaml = minimalTail + "\n    path: /exact"
    expectSingleError(yaml, line: 10, column: 11, "route 'all' has both 'path' and 'prefix'; use exactly one")
}

@Test func pathMustStartWithSlash() {
    let yaml = minimalTail.replacingOccurrences(of: "prefix: /", with: "prefix: v1/")
    expectSingleError(yaml, line: 8, column: 13, "route 'all' prefix must start with '/'")
}

@Test func tlsBelowOnePointTwoIsRefused() throws {
    let files = try makeTLSFiles()
    defer { try? FileManager.default.removeItem(at: files) }
    let yaml = """
    server:
      tls:
        certificate: \(files.path)/cert.pem
        private_key: \(files.path)/key.pem
        min_version: "1.1"
    """ + "\n" + minimalTail
    expectSingleError(yaml, line: 5, column: 18, "TLS below 1.2 is refused (App Transport Security)")
}

@Test func tlsFilesMustExist() throws {
    let files = try makeTLSFiles()
    defer { try? FileManager.default.removeItem(at: files) }
    let yaml = """
    server:
      tls:
        certificate: \(files.path)/missing.pem
        private_key: \(files.path)/key.pem
    """ + "\n" + minimalTail
    expectSingleError(yaml, line: 3, column: 18, "does not exist")
}

@Test func tlsRequiresCertificateAndKey() {
    let errors = makeErrors("server:\n  tls:\n    listen: [\"0.0.0.0:8443\"]\n" + minimalTail)
    #expect(errors.map(\.message) == [
        "missing required key 'certificate' in server.tls", "missing required key 'private_key' in server.tls",
    ])
    #expect(errors.allSatisfy { ($0.line, $0.column) == (3, 5) })
}

@Test func invalidRegularExpression() {
    let yaml = "app_check:\n  project_number: \"1\"\n  outdated_client:\n    header: User-Agent\n    pattern: \"^(MyApp\"\n"
        + minimalTail.split(separator: "\n").dropFirst(2).joined(separator: "\n")
    expectSingleError(yaml, line: 5, column: 14, "invalid regular expression '^(MyApp' for app_check.outdated_client.pattern")
}

@Test func adminListenMustNotBeAPublicAddress() {
    let yaml = "server:\n  listen: [\"0.0.0.0:9000\"]\n  admin_listen: 127.0.0.1:9000\n" + minimalTail
    expectSingleError(yaml, line: 3, column: 17, "admin_listen 127.0.0.1:9000 must not be a public listen address")
}

@Test func adminListenCanBeTurnedOff() throws {
    let settings = try #require(makeSettings("server:\n  admin_listen: \"off\"\n" + minimalTail))
    #expect(settings.server.adminListen == nil)
}

@Test func duplicateRouteName() {
    let yaml = minimalTail.replacingOccurrences(of: "prefix: /", with: "prefix: /a/") + "\n  - {name: all, prefix: /, upstream: api}"
    expectSingleError(yaml, line: 10, column: 12, "duplicate route name 'all' (first at 7:11)")
}

@Test func routeAfterCatchAllIsUnreachable() {
    let yaml = minimalTail + "\n  - {name: late, path: /v1/x, upstream: api}"
    expectSingleError(yaml, line: 10, column: 24, "route 'late' can never match: route 'all' at 7:5 comes first")
}

@Test func routeAfterMethodRestrictedCatchAllIsReachable() throws {
    let yaml = minimalTail.replacingOccurrences(of: "prefix: /", with: "prefix: /\n    methods: [GET]")
        + "\n  - {name: writes, prefix: /, upstream: api}"
    let settings = try #require(makeSettings(yaml))
    #expect(settings.routes.map(\.name) == ["all", "writes"])
}

@Test func atLeastOneRouteIsRequired() {
    let yaml = "app_check:\n  project_number: \"1\"\nupstreams:\n  api: {url: \"http://a:1\"}\nroutes: []\n"
    expectSingleError(yaml, line: 5, column: 9, "at least one route is required")
}

@Test func yamlSyntaxErrorCarriesTheParserPosition() {
    let errors = makeErrors("server:\n  listen: [\"0.0.0.0:8080\"\n  threads: 2\n")
    #expect(errors.count == 1, "\(errors)")
    #expect(errors.first?.message.hasPrefix("YAML syntax error") == true)
    #expect(errors.first.map { $0.line > 1 } == true, "\(errors)")
}

@Test func everyErrorInTheFileIsReported() {
    let yaml = """
    server:
      listn: []
      threads: 0
      limits:
        idle_timeout: forever
    app_check:
      project_number: abc
    upstreams:
      api:
        url: http://127.0.0.1:3000
    routes:
      - name: r
        prefix: /
        upstream: nope
    """
    let errors = makeErrors(yaml)
    #expect(errors.count == 5, "\(errors)")
    #expect(errors.map(\.line) == [2, 3, 5, 7, 14], "sorted by position")
}

// MARK: Files and formats

@Test func missingFileIsOneErrorAtOneOne() {
    guard case let .failure(errors) = ConfigLoader.load(path: "/nonexistent/gateway.yaml", environment: [:]) else {
        Issue.record("a missing file loaded")
        return
    }
    #expect(errors.description == "/nonexistent/gateway.yaml:1:1: cannot read file: No such file or directory")
}

@Test func loadsFromAFile() throws {
    let files = try makeTLSFiles()
    defer { try? FileManager.default.removeItem(at: files) }
    let path = files.appendingPathComponent("gateway.yaml").path
    try Data(minimalTail.utf8).write(to: URL(fileURLWithPath: path))
    let settings = try ConfigLoader.load(path: path, environment: [:]).get()
    #expect(settings.sourcePath == path)
    #expect(settings.routes.count == 1)
}

@Test func errorDescriptionsAreFileLineColumnMessage() {
    let first = ConfigError(file: "a.yaml", line: 3, column: 7, message: "bad")
    let second = ConfigError(file: "a.yaml", line: 9, column: 1, message: "worse")
    #expect(first.description == "a.yaml:3:7: bad")
    #expect(ConfigErrors(errors: [first, second]).description == "a.yaml:3:7: bad\na.yaml:9:1: worse")
}

@Test func valueSyntaxes() throws {
    #expect(ConfigValueParser.duration("250ms") == 0.25)
    #expect(ConfigValueParser.duration("1.5s") == 1.5)
    #expect(ConfigValueParser.duration("5m") == 300)
    #expect(ConfigValueParser.duration("6h") == 21600)
    #expect(ConfigValueParser.duration("7d") == 604_800)
    #expect(ConfigValueParser.duration("30") == nil)
    #expect(ConfigValueParser.duration("-1s") == nil)
    #expect(ConfigValueParser.size("16KiB") == 16384)
    #expect(ConfigValueParser.size("10KB") == 10000)
    #expect(ConfigValueParser.size("1GiB") == 1 << 30)
    #expect(ConfigValueParser.size("512") == 512)
    #expect(ConfigValueParser.size("7B") == 7)
    #expect(ConfigValueParser.size("1.5MiB") == nil)
    #expect(ConfigValueParser.size("10kib") == nil)
    #expect(try ConfigValueParser.cidr("10.1.2.3/8").get() == CIDR(address: [10, 0, 0, 0], prefixLength: 8))
    #expect(try ConfigValueParser.cidr("192.168.1.1").get().prefixLength == 32)
    #expect(try ConfigValueParser.cidr("::1").get().prefixLength == 128)
    #expect(try ConfigValueParser.cidr("2001:db8::/32").get().address.prefix(4) == [0x20, 0x01, 0x0d, 0xb8])
    #expect(throws: ConfigValueFailure.self) { try ConfigValueParser.cidr("10.0.0/8").get() }
    #expect(try ConfigValueParser.hostPort("[::1]:8443", defaultPort: nil).get() == HostPort(host: "::1", port: 8443))
    #expect(try ConfigValueParser.hostPort("localhost:0", defaultPort: nil).get() == HostPort(host: "localhost", port: 0))
    #expect(throws: ConfigValueFailure.self) { try ConfigValueParser.hostPort("1.2.3.4:65536", defaultPort: nil).get() }
    #expect(throws: ConfigValueFailure.self) { try ConfigValueParser.hostPort("::1:80", defaultPort: nil).get() }
}

@Test func upstreamURLForms() throws {
    let v6 = try ConfigDecoder.upstreamURL("http://[::1]:3000/api/v1/", name: "x").get()
    #expect((v6.host, v6.port, v6.basePath) == ("::1", 3000, "/api/v1"))
    let plain = try ConfigDecoder.upstreamURL("HTTPS://example.com/", name: "x").get()
    #expect((plain.scheme, plain.port, plain.basePath) == ("https", 443, ""))
    #expect(throws: ConfigValueFailure.self) { try ConfigDecoder.upstreamURL("http://user@h/", name: "x").get() }
    #expect(throws: ConfigValueFailure.self) { try ConfigDecoder.upstreamURL("http:///path", name: "x").get() }
}

@Test func caFileOnlyForHTTPS() {
    let yaml = minimalTail.replacingOccurrences(of: "url: http://127.0.0.1:3000", with: "url: http://127.0.0.1:3000\n    ca_file: /etc/ssl/ca.pem")
    expectSingleError(yaml, line: 6, column: 14, "upstreams.api.ca_file applies only to https:// upstreams")
}

@Test func describeRoutesPrintsListenersAndOneLinePerRoute() throws {
    let yaml = minimalTail.replacingOccurrences(of: "  - name: all", with: """
      - name: redeem
        path: /v1/redeem
        methods: [POST]
        upstream: api
        replay_protection: true
        max_body_bytes: 64KiB
      - name: all
    """)
    let settings = try #require(makeSettings(yaml + "\n    enforcement: monitor", cores: 2))
    let text = describeRoutes(settings)
    let lines = text.split(separator: "\n").map(String.init)
    #expect(lines.contains { $0.hasPrefix("  http ") && $0.contains("0.0.0.0:8080") })
    #expect(lines.contains { $0.hasPrefix("  admin") && $0.contains("127.0.0.1:9901") })
    #expect(lines.contains("threads: 2"))
    let redeem = try #require(lines.first { $0.hasPrefix("  redeem") })
    #expect(redeem.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            == ["redeem", "=", "/v1/redeem", "POST", "api", "http://127.0.0.1:3000", "enforce", "yes", "64KiB"])
    let all = try #require(lines.first { $0.hasPrefix("  all") })
    #expect(all.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            == ["all", "/*", "*", "api", "http://127.0.0.1:3000", "monitor", "no", "10MiB"])
}

@Test func certificateATSWouldRefuseIsAnErrorAtTheCertificateValue() throws {
    let weak = try makeTLSFiles(bits: 1024, digest: "sha1")
    defer { try? FileManager.default.removeItem(at: weak) }
    let yaml = """
    server:
      tls:
        certificate: \(weak.path)/cert.pem
        private_key: \(weak.path)/key.pem
    app_check:
      project_number: "1"
    upstreams:
      api:
        url: http://127.0.0.1:3000
    routes:
      - name: r
        prefix: /
        upstream: api
    """
    guard case .failure(let errors) = ConfigLoader.load(yaml: yaml, path: "weak.yaml", environment: [:], cores: 1) else {
        Issue.record("a 1024-bit SHA-1 certificate must be refused")
        return
    }
    let texts = errors.errors.map(\.description)
    #expect(texts.contains { $0.hasPrefix("weak.yaml:3:18:") && $0.contains("1024") }, "\(texts)")
    #expect(texts.contains { $0.hasPrefix("weak.yaml:3:18:") && $0.lowercased().contains("sha-1") || $0.lowercased().contains("sha1") }, "\(texts)")
}

@Test func bodyTimeoutIsBoundedAndReportedWithItsPosition() {
    expectSingleError("server:\n  limits:\n    body_timeout: 500ms\n" + minimalTail,
                      line: 3, column: 19, "server.limits.body_timeout must be between")
    expectSingleError("server:\n  limits:\n    body_timeout: 2h\n" + minimalTail,
                      line: 3, column: 19, "server.limits.body_timeout must be between")
    expectSingleError("server:\n  limits:\n    body_timeout: soon\n" + minimalTail,
                      line: 3, column: 19, "invalid duration 'soon' for server.limits.body_timeout")
}
