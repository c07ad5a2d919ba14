/// The configuration `appcheck-gateway demo` runs when no `--config` is given, built into the binary so the demo
/// works from any directory (and from an installed binary). `Config/demo.yaml` in the repository is the same
/// text, kept identical by a test (`OperationsTests.demoRunsFromAnyDirectory`). The demo writes it into its
/// temporary directory and serves from there, so `SIGHUP` reloads work as for `serve`.
enum DemoConfiguration {
    /// The text of `Config/demo.yaml`, final newline included. `${DEMO_UPSTREAM_PORT}`, `${DEMO_JWKS_URL}`,
    /// `${DEMO_ISSUER_KEY}` and `${DEMO_APPATTEST_ROOT}` are filled in by the demo; `${DEMO_PORT}` (default 8080) and `${DEMO_ADMIN_PORT}` (default 9901) may be set by
    /// the user.
    static let yaml = """
    # The configuration `appcheck-gateway demo` runs. It is built into the binary, so the demo works from any
    # directory; `appcheck-gateway demo --config FILE` runs another file instead. The gateway listens on
    # 127.0.0.1:8080 (set DEMO_PORT to change it; admin on DEMO_ADMIN_PORT, default 9901) in front of the built-in
    # sample upstream, and verifies tokens against a local issuer's key set (the demo fills in DEMO_UPSTREAM_PORT
    # and DEMO_JWKS_URL). It is also an App Check provider itself (issuer:, docs/issuer.md): a simulated iPhone
    # attests through it with a test App Attest CA the demo makes at start (DEMO_ISSUER_KEY, DEMO_APPATTEST_ROOT),
    # and its receipt is refreshed for Apple's fraud-risk metric by a demo stand-in for Apple's App Attest data server
    # (DEMO_RECEIPT_ROOT, DEMO_APPLE_DATA_URL, DEMO_DEVICECHECK_KEY: never Apple, which answers only receipts it signed).
    # Nothing here needs a Firebase project.
    server:
      listen: ["127.0.0.1:${DEMO_PORT:-8080}"]
      admin_listen: "127.0.0.1:${DEMO_ADMIN_PORT:-9901}"
      threads: 1
      log_level: info

    app_check:
      project_number: "123456789012"
      project_id: "demo-project"
      clock_skew: 2s                  # short for the demo: a fresh replay store refuses limited-use tokens issued
                                      # in its first clock_skew (docs/replay.md); production keeps the 10s default
      jwks:
        url: "${DEMO_JWKS_URL:-http://127.0.0.1:18082/jwks}"
        unknown_kid_refresh_interval: 5s

    replay:
      store: memory

    dashboard:                        # http://127.0.0.1:9901/dashboard
      min_requests: 5                 # low for the demo: its steps 1-4 send 5 or more per route (production: 1000)

    issuer:                           # the gateway mints App Check tokens too: POST /appcheck/v1/projects/...
      base_path: /appcheck
      issuer_url: http://127.0.0.1:${DEMO_PORT:-8080}/appcheck
      signing_keys: ["${DEMO_ISSUER_KEY}"]
      state: { store: memory }        # production: sqlite or redis (attested keys must survive restarts)
      apps:
        - app_id: "1:123456789012:ios:0123456789abcdef"
          team_id: DEMOTEAM01
          bundle_id: com.example.demo
          app_attest:
            environments: [development]
            root_ca_file: "${DEMO_APPATTEST_ROOT}"   # the demo's test CA; omit for Apple's real root
            receipt_root_ca_file: "${DEMO_RECEIPT_ROOT}"   # the demo's receipt CA; omit for Apple Root CA - G3
            risk: { refresh: 24h, api_url: "${DEMO_APPLE_DATA_URL}" }   # the demo stand-in; omit api_url for Apple
          device_check:                   # signs the refresher's calls; a throwaway key the demo makes at start
            key_id: DEMOKEY001
            private_key: "${DEMO_DEVICECHECK_KEY}"
            api_url: "${DEMO_APPLE_DATA_URL}"   # the stand-in answers only attestationData (DeviceCheck tokens get 503)
          max_risk_metric: 20             # assertions from devices past 20 attestations in 30 days are refused
          debug_secrets: ["demo-debug-secret-change-me"]
        - app_id: "1:123456789012:android:0123456789abcdef"   # a simulated Android phone: Key Attestation, no Play services
          android:
            package_name: com.example.demo
            signing_cert_sha256: ["d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1"]   # the demo's; yours: Play Console
            root_ca_file: "${DEMO_ANDROID_ROOT:-}"        # the demo's test CA; empty or omitted: Google's real roots
            revocation_url: "${DEMO_ANDROID_STATUS:-}"    # a local copy; empty or omitted: Google's status list

    upstreams:
      sample:
        url: http://127.0.0.1:${DEMO_UPSTREAM_PORT:-18081}

    routes:
      - name: redeem                  # limited-use tokens, each accepted once
        path: /api/redeem
        methods: [POST]
        upstream: sample
        enforcement: enforce
        replay_protection: true
        max_risk: 10                  # tokens carrying a risk claim above 10 are refused; tokens without one pass
      - name: orders                  # a valid token is required
        prefix: /api/
        upstream: sample
        enforcement: enforce
      - name: public                  # forwarded whatever the token; the upstream is told the verdict
        prefix: /public/
        upstream: sample
        enforcement: monitor

    """
}
