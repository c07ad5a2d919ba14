import GatewayConfig

/// `ConfigErrorTableTests` rows: the file and its YAML, the value templates shared by every section (wrong types,
/// unknown keys, `${VAR}`, numbers, durations, sizes, choices, addresses), the top level and `server:`.
extension ConfigErrorTable {
    static let loader: [ConfigErrorCase] = [
        ConfigErrorCase(input: .missingFile, line: 1, column: 1, fragment: "cannot read file: No such file or directory"),
        ConfigErrorCase(input: .file([0x61, 0x3A, 0x20, 0xFF, 0x0A]), line: 1, column: 1,
                        fragment: "cannot read file: file is not valid UTF-8"),
        ConfigErrorCase(input: .file([UInt8](repeating: 0x23, count: ConfigLoader.maxFileBytes + 1)), line: 1, column: 1,
                        fragment: "cannot read file: file is larger than 4MiB"),
        bad("", 1, 1, "the configuration is empty; app_check and routes are required"),
        bad("# nothing but a comment\n", 1, 1, "the configuration is empty"),
        bad("server:\n  threads: 1\n  threads: 2\n" + tail, 3, 3, "duplicate key 'threads' (first at 2:3)"),
        // Keys compare after unescaping: a first occurrence spelled with an escape is the same key.
        bad("server:\n  \"thr\\x65ads\": 1\n  threads: 2\n" + tail, 3, 3, "duplicate key 'threads' (first at 2:3)"),
        // `1` and "1" are the same name to the decoder (tags are not resolved): a duplicate, not two upstreams of
        // which one would silently replace the other.
        bad(appCheckYAML + "upstreams:\n  1:\n    url: http://127.0.0.1:1\n  \"1\":\n    url: http://127.0.0.1:2\n" + routesYAML,
            6, 3, "duplicate key '1' (first at 4:3)", errors: 2),
        bad("server:\n  threads: a: b\n" + tail, 2, 13, "YAML syntax error: mapping values are not allowed in this context"),
        bad("routes:\n  - name: a\n  name: b\n", 3, 3,
            "YAML syntax error: did not find expected '-' indicator (while parsing a block collection at 2:3)"),
        // A tab where indentation belongs: libyaml's words, and ours about tabs (issue 39).
        bad("server:\n\tthreads: 1\n" + tail, 2, 1, 
            "found character that cannot start any token (while scanning for the next token at 2:1); the line has a tab before this point: YAML indents with spaces only, never tabs"),
        bad("server: *nowhere\n" + tail, 1, 9, "YAML structure error: found undefined alias"),
        // An anchor is defined once its node is complete: a list cannot hold itself.
        bad("server: &s [*s]\n" + tail, 1, 13, "YAML structure error: found undefined alias"),
        bad("a: 1\n---\nb: 2\n", 2, 1, "YAML structure error: a second document starts here"),
        // Issue 39: aliases are bounded by what they stand for, written out (8 MiB): a 100 kB scalar aliased 83
        // times, and nested lists of ten aliases each (a "billion laughs"), stop at the alias that passes it.
        bad("x: &s \"" + String(repeating: "A", count: 100_000) + "\"\ny: [" + Array(repeating: "*s", count: 100).joined(separator: ", ")
            + "]\n", 2, 5 + 4 * 82, "YAML structure error: with its aliases written out the configuration passes 8MiB here"),
        bad((0..<7).map { level in
                let name = String(UnicodeScalar(UInt8(97 + level)))
                let item = level == 0 ? "x" : "*" + String(UnicodeScalar(UInt8(96 + level)))
                return "\(name): &\(name) [" + Array(repeating: item, count: 10).joined(separator: ", ") + "]\n"
            }.joined(), 7, 16, "YAML structure error: with its aliases written out the configuration passes 8MiB here"),
        bad(String(repeating: "[", count: 101) + "\n", 1, 101, "YAML structure error: lists and mappings nest deeper"),
        bad("server:\n  log_level: inf\u{1}o\n" + tail, 2, 17, "cannot read YAML: control characters are not allowed"),
    ]

    static let server: [ConfigErrorCase] = [
        // Wrong types: each names what was expected, where, and what was found.
        bad("server: [a]\n" + tail, 1, 9, "expected a mapping for server, got a list"),
        bad("server: on\n" + tail, 1, 9, "expected a mapping for server, got a scalar"),
        bad("server:\n  [a]: 1\n" + tail, 2, 3, "keys in server must be plain strings, got a list"),
        bad("server:\n  listen: {a: 1}\n" + tail, 2, 11, "expected a list for server.listen, got a mapping"),
        bad("server:\n  log_level: {a: 1}\n" + tail, 2, 14, "expected a string for server.log_level, got a mapping"),
        bad("server:\n  log_level: [info]\n" + tail, 2, 14, "expected a string for server.log_level, got a list"),
        // Unknown keys.
        bad("server:\n  thread: 2\n" + tail, 2, 3, "unknown key 'thread' in server; did you mean 'threads'?"),
        // A limit written one level too high points at where it lives (issue 39).
        bad("server:\n  shutdown_grace: 10s\n" + tail, 2, 3,
            "unknown key 'shutdown_grace' in server; it belongs under server.limits (server: limits: shutdown_grace: …)"),
        bad("server:\n  zzzzzz: 1\n" + tail, 2, 3,
            "unknown key 'zzzzzz' in server (known keys: listen, tls, admin_listen, threads, limits, trusted_proxies, log_level)"),
        // ${VAR} expansion.
        bad("server:\n  log_level: ${LEVEL\n" + tail, 2, 14, "unterminated '${' (write '$${' for a literal '${')"),
        bad("server:\n  log_level: ${1LEVEL}\n" + tail, 2, 14,
            "invalid variable reference '${1LEVEL}': expected ${NAME} or ${NAME:-default}"),
        bad("server:\n  log_level: ${LEVEL}\n" + tail, 2, 14,
            "environment variable 'LEVEL' is not set (write ${LEVEL:-default} to give a default)"),
        // Choices, whole numbers, durations, sizes.
        bad("server:\n  log_level: loud\n" + tail, 2, 14, "invalid value 'loud' for server.log_level: expected debug, info, warning or error"),
        bad("server:\n  threads: 0\n" + tail, 2, 12, "invalid value '0' for server.threads: expected auto or a number from 1 to 1024"),
        bad("server:\n  limits:\n    max_connections: lots\n" + tail, 3, 22,
            "invalid value 'lots' for server.limits.max_connections: expected a whole number"),
        bad("server:\n  limits:\n    max_connections: 0\n" + tail, 3, 22,
            "server.limits.max_connections must be between 1 and 10000000, got 0"),
        bad("server:\n  limits:\n    header_timeout: 10\n" + tail, 3, 21,
            "invalid duration '10' for server.limits.header_timeout: expected a number and a unit ms, s, m, h or d"),
        bad("server:\n  limits:\n    header_timeout: 0s\n" + tail, 3, 21, "server.limits.header_timeout must be positive, got 0s"),
        bad("server:\n  limits:\n    shutdown_grace: 2h\n" + tail, 3, 21, "server.limits.shutdown_grace must be between 0ms and 1h, got 2h"),
        bad("server:\n  limits:\n    max_body_bytes: 10 MB\n" + tail, 3, 21,
            "invalid size '10 MB' for server.limits.max_body_bytes: expected bytes or a number with B, KB, KiB, MB, MiB, GB or GiB"),
        bad("server:\n  limits:\n    max_header_bytes: 100\n" + tail, 3, 23,
            "server.limits.max_header_bytes must be between 1KiB and 1MiB, got 100"),
        // Listen addresses: every way `host:port` can be wrong.
        listen("[::1", "missing ']' after the IPv6 address"),
        listen("[::1]8080", "expected ':port' after ']'"),
        listen("[::g]:80", "'::g' is not an IPv6 address"),
        listen("::1:80", "an IPv6 address must be written in brackets, e.g. [::1]:8080"),
        listen(":8080", "missing host (write 0.0.0.0:PORT to listen on every IPv4 address)"),
        listen("8080", "expected host:port (for every interface write 0.0.0.0:8080)"),
        listen("1.2.3.256:80", "'1.2.3.256' is not an IPv4 address"),
        listen("bad!host:80", "'bad!host' is not a valid host name"),
        listen("localhost:99999", "port must be a number from 0 to 65535"),
        listen("localhost", "expected host:port, the port is missing"),
        // Issue 39: an IPv4-mapped IPv6 address passed here and then failed at bind (EINVAL on an IPv6-only socket).
        listen("[::ffff:127.0.0.1]:18081",
               "an IPv4-mapped IPv6 address cannot be listened on (IPv6 listeners are IPv6-only); write 127.0.0.1:18081"),
        bad("server:\n  admin_listen: \"[::ffff:127.0.0.1]:9901\"\n" + tail, 2, 17,
            "invalid address '[::ffff:127.0.0.1]:9901' for server.admin_listen: an IPv4-mapped IPv6 address cannot be listened on"),
        // Listeners that clash.
        bad("server:\n  listen: []\n" + tail, 2, 3, "no public listener: server.listen is empty and there is no server.tls"),
        bad("server:\n  listen: [\"0.0.0.0:8080\", \"127.0.0.1:8080\"]\n" + tail, 2, 28,
            "listen address 127.0.0.1:8080 overlaps 0.0.0.0:8080 at 2:12"),
        bad("server:\n  listen: [\"0.0.0.0:9901\"]\n" + tail, 2, 12,
            "listen address 0.0.0.0:9901 clashes with the default admin_listen 127.0.0.1:9901; set server.admin_listen elsewhere"),
        bad("server:\n  admin_listen: \"0.0.0.0:8080\"\n" + tail, 2, 17,
            "admin_listen 0.0.0.0:8080 must not be a public listen address (0.0.0.0:8080 at 2:3): /metrics is not for the internet"),
        // trusted_proxies.
        bad("server:\n  trusted_proxies: [\"10.0.0.0/8/1\"]\n" + tail, 2, 21,
            "invalid CIDR '10.0.0.0/8/1' in server.trusted_proxies: expected an address or address/prefix-length"),
        bad("server:\n  trusted_proxies: [\"10.0.0/8\"]\n" + tail, 2, 21,
            "invalid CIDR '10.0.0/8' in server.trusted_proxies: '10.0.0' is not an IPv4 or IPv6 address"),
        bad("server:\n  trusted_proxies: [\"10.0.0.0/33\"]\n" + tail, 2, 21,
            "invalid CIDR '10.0.0.0/33' in server.trusted_proxies: prefix length must be 0 to 32"),
    ]

    /// `server.listen: ["ADDRESS"]`; the address is at 2:12.
    static func listen(_ address: String, _ problem: String) -> ConfigErrorCase {
        bad("server:\n  listen: [\"\(address)\"]\n" + tail, 2, 12, "invalid address '\(address)' for server.listen: \(problem)")
    }

    /// `server.tls` with the given certificate and key (lines 3 and 4; the certificate's value at 3:18) and more lines.
    static func tlsSection(certificate: String = "${D}/server.pem", key: String = "${D}/server.key", _ more: String = "") -> String {
        "server:\n  tls:\n    certificate: \(certificate)\n    private_key: \(key)\n" + more + tail
    }

    /// What App Transport Security would refuse, reported at the `certificate:` value as `PATH: problem`.
    static func audit(certificate: String = "${D}/server.pem", key: String = "${D}/server.key", _ problem: String) -> ConfigErrorCase {
        bad(tlsSection(certificate: certificate, key: key), 3, 18, problem)
    }

    static let tls: [ConfigErrorCase] = [
        bad("server:\n  tls:\n    listen: []\n    certificate: ${D}/server.pem\n    private_key: ${D}/server.key\n" + tail, 3, 13,
            "server.tls.listen must not be empty"),
        bad("server:\n  tls:\n    private_key: ${D}/server.key\n" + tail, 3, 5, "missing required key 'certificate' in server.tls"),
        bad("server:\n  tls:\n    certificate: ${D}/server.pem\n" + tail, 3, 5, "missing required key 'private_key' in server.tls"),
        bad(tlsSection("    min_version: \"1.1\"\n"), 5, 18,
            "TLS below 1.2 is refused (App Transport Security); min_version must be \"1.2\" or \"1.3\""),
        bad(tlsSection("    min_version: \"2.0\"\n"), 5, 18, "invalid value '2.0' for server.tls.min_version: expected \"1.2\" or \"1.3\""),
        bad(tlsSection(certificate: "/no/such/cert.pem"), 3, 18, "server.tls.certificate '/no/such/cert.pem' does not exist"),
        bad(tlsSection(certificate: "/tmp"), 3, 18, "server.tls.certificate '/tmp' is a directory, expected a file"),
        bad(tlsSection(certificate: "\"\""), 3, 18, "server.tls.certificate must not be empty"),
        audit(certificate: "${D}/not-pem.txt", "not-pem.txt: no PEM certificate found (expected -----BEGIN CERTIFICATE-----)"),
        audit(certificate: "${E}/broken-chain.pem", "broken-chain.pem: a PEM certificate block cannot be parsed"),
        audit(key: "${D}/not-pem.txt", "not-pem.txt: no PEM private key found (expected -----BEGIN PRIVATE KEY-----)"),
        audit(key: "${D}/encrypted.key", "encrypted.key: the private key is encrypted; the gateway needs an unencrypted PEM key"),
        audit(certificate: "${D}/rsa1024.pem", key: "${D}/rsa1024.key",
              "rsa1024.pem: leaf certificate (/CN=localhost) has a 1024-bit RSA key; ATS requires at least 2048 bits"),
        audit(certificate: "${D}/ec224.pem", key: "${D}/ec224.key",
              "ec224.pem: leaf certificate (/CN=localhost) has a 224-bit EC key; ATS requires at least 256 bits"),
        audit(certificate: "${E}/ed25519.pem", key: "${E}/ed25519.key",
              "ed25519.pem: leaf certificate (/CN=localhost) has a ED25519 key; ATS accepts RSA (≥ 2048 bits) or ECDSA (≥ 256 bits)"),
        audit(certificate: "${D}/sha1.pem", key: "${D}/sha1.key",
              "sha1.pem: leaf certificate (/CN=localhost) is signed with SHA1; ATS requires SHA-256 or better"),
        audit(certificate: "${D}/expired.pem", key: "${D}/expired.key", "expired.pem: leaf certificate (/CN=localhost) expired on Mar  1"),
        audit(certificate: "${D}/future.pem", key: "${D}/future.key",
              "future.pem: leaf certificate (/CN=localhost) is not valid before Jan  1"),
        audit(key: "${D}/stray.key", "stray.key: the private key does not match the certificate in"),
    ]
}
