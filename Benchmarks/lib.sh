# Shared helpers for the scripts in Benchmarks/ (run.sh, callgrind.sh, soak.sh, defects.sh, ...). Source it; do not run it.
#
# Everything started through these helpers is recorded in BENCH_PIDS and stopped by bench_cleanup (installed
# as the EXIT trap by bench_init). All files go to BENCH_TMP (a fresh mktemp dir, removed on exit unless
# BENCH_KEEP_TMP=1). Only loopback addresses are used.

BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$BENCH_DIR/.." && pwd)"
GATEWAY_BIN="${GATEWAY_BIN:-$REPO_ROOT/.build/release/appcheck-gateway}"
BENCH_PIDS=()
BENCH_TMP=""

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

bench_init() {
    BENCH_TMP="$(mktemp -d /tmp/appcheck-bench.XXXXXX)"
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
    # File descriptors: 10,000 idle connections need ~10k fds in the gateway and in the client. Ask for
    # 65536; without CAP_SYS_RESOURCE the hard limit caps it, so fall back to the hard limit and say so.
    local want=65536 hard
    hard="$(ulimit -Hn)"
    if ! ulimit -n "$want" 2>/dev/null; then
        if [[ "$hard" != unlimited && "$hard" -lt "$want" ]]; then
            ulimit -n "$hard"
            log "ulimit -n: hard limit is $hard (cannot raise to $want here); using $hard"
        fi
    fi
    BENCH_NOFILE="$(ulimit -n)"
}

bench_cleanup() {
    local rc=$? pid
    for pid in "${BENCH_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${BENCH_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    BENCH_PIDS=()
    if [[ -n "$BENCH_TMP" && -d "$BENCH_TMP" ]]; then
        if [[ "${BENCH_KEEP_TMP:-0}" == 1 ]]; then log "kept $BENCH_TMP"; else rm -rf "$BENCH_TMP"; fi
    fi
    return "$rc"
}

# stop_pid PID: stops one process we started (TERM, then KILL after 5 s) and forgets it.
stop_pid() {
    local pid="$1" keep=() p
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    for p in "${BENCH_PIDS[@]}"; do [[ "$p" == "$pid" ]] || keep+=("$p"); done
    BENCH_PIDS=("${keep[@]}")
}

# free_ports N: prints N distinct free loopback TCP ports (bound to port 0 by the kernel, then released).
free_ports() {
    python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks: s.close()
PY
}

# wait_http URL [SECONDS] [PID]: waits until URL answers 200; fails early if PID dies.
wait_http() {
    local url="$1" secs="${2:-30}" pid="${3:-}"
    local deadline=$((SECONDS + secs))
    while ((SECONDS < deadline)); do
        if [[ -n "$pid" ]] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        if python3 - "$url" <<'PY' 2>/dev/null; then return 0; fi
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=1) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
        sleep 0.2
    done
    return 1
}

# http_body URL: prints the body of a GET (for sanity checks).
http_body() {
    python3 - "$1" <<'PY'
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    sys.stdout.write(f"{r.status} {r.read().decode(errors='replace')}")
PY
}

_nginx_common() {  # _nginx_common NAME WORKERS
    local dir="$BENCH_TMP/$1"
    mkdir -p "$dir/tmp"
    [[ $EUID -eq 0 ]] && echo "user root;"
    cat <<EOF
daemon off;
master_process ${NGINX_MASTER_PROCESS:-on};
worker_processes $2;
worker_rlimit_nofile 65536;
pid $dir/nginx.pid;
error_log $dir/err.log warn;
events { worker_connections 16384; }
EOF
}

_nginx_http_common() {  # _nginx_http_common NAME
    local dir="$BENCH_TMP/$1/tmp"
    cat <<EOF
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 1000000;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
EOF
}

_start_nginx() {  # _start_nginx NAME CONF PORT -> sets NGINX_PID
    local name="$1" conf="$2" port="$3"
    nginx -t -q -p "$BENCH_TMP/$name" -e "$BENCH_TMP/$name/err.log" -c "$conf" \
        || die "nginx config $conf is invalid (see $BENCH_TMP/$name/err.log)"
    # NGINX_WRAPPER (e.g. valgrind ...) wraps this nginx only; with NGINX_MASTER_PROCESS=off it is one process.
    ${NGINX_WRAPPER:-} nginx -p "$BENCH_TMP/$name" -e "$BENCH_TMP/$name/err.log" -c "$conf" \
        >"$BENCH_TMP/$name/stdout.log" 2>"$BENCH_TMP/$name/stderr.log" &
    NGINX_PID=$!
    BENCH_PIDS+=("$NGINX_PID")
    wait_http "http://127.0.0.1:$port/" "${NGINX_START_TIMEOUT:-15}" "$NGINX_PID" \
        || die "nginx '$name' did not come up on $port: $(cat "$BENCH_TMP/$name/err.log" "$BENCH_TMP/$name/stderr.log" 2>/dev/null)"
}

# start_backend PORT [SERVER_LINES]: static nginx answering 200 "ok\n" to everything (1 worker); SERVER_LINES (nginx
# directives) go into its server block before that catch-all. Sets BACKEND_PID.
start_backend() {
    local port="$1" extra="${2:-}" conf="$BENCH_TMP/backend.conf"
    {
        _nginx_common backend 1
        echo "http {"
        _nginx_http_common backend
        cat <<EOF
    server {
        listen 127.0.0.1:$port backlog=4096;
$extra
        location / { return 200 "ok\n"; }
    }
}
EOF
    } >"$conf"
    _start_nginx backend "$conf" "$port"
    BACKEND_PID=$NGINX_PID
}

# start_nginx_proxy PORT BACKEND_PORT WORKERS [TLS_PORT CERT KEY]: the nginx peer (proxy_pass with upstream
# keep-alive). With TLS_PORT the same server also listens there with `ssl http2` (TLS 1.2/1.3, nginx's default
# ciphers; session tickets on, as nginx and the gateway both default to). Sets NGINX_PROXY_PID.
start_nginx_proxy() {
    local port="$1" backend="$2" workers="$3" conf="$BENCH_TMP/nginx-proxy.conf"
    local tls_port="${4:-}" cert="${5:-}" key="${6:-}" tls_lines=""
    if [[ -n "$tls_port" ]]; then
        tls_lines="        listen 127.0.0.1:$tls_port ssl http2 backlog=4096;
        ssl_certificate $cert;
        ssl_certificate_key $key;
        ssl_protocols TLSv1.2 TLSv1.3;"
    fi
    {
        _nginx_common nginx-proxy "$workers"
        echo "http {"
        _nginx_http_common nginx-proxy
        cat <<EOF
    upstream b {
        server 127.0.0.1:$backend;
        keepalive 1024;
        keepalive_requests 1000000;
        keepalive_timeout 300s;
    }
    server {
        listen 127.0.0.1:$port backlog=4096;
$tls_lines
        location / {
            proxy_pass http://b;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
    } >"$conf"
    _start_nginx nginx-proxy "$conf" "$port"
    NGINX_PROXY_PID=$NGINX_PID
}

# start_grpc_backend PORT CHECK_PORT: the gRPC upstream of case G and grpc.sh, nginx over h2c on PORT (and HTTP/1.1 on
# CHECK_PORT, for the readiness check) answering every call with one gRPC message (field 1 = 1) and the trailer
# `grpc-status: 0`: a POST to a static file is a 405, turned into the file's 200. Writes the request body (the same
# 7-byte message) to $BENCH_TMP/grpc-request.bin. Sets GRPC_BACKEND_PID.
start_grpc_backend() {
    local port="$1" check="$2"
    mkdir -p "$BENCH_TMP/grpc-www"
    printf '\x00\x00\x00\x00\x02\x08\x01' >"$BENCH_TMP/grpc-www/reply.bin"
    cp "$BENCH_TMP/grpc-www/reply.bin" "$BENCH_TMP/grpc-request.bin"
    {
        _nginx_common grpc-backend 1
        echo "http {"
        _nginx_http_common grpc-backend
        cat <<EOF
    server {
        listen 127.0.0.1:$port http2 backlog=4096;
        listen 127.0.0.1:$check;
        keepalive_requests 1000000;
        location / {
            root $BENCH_TMP/grpc-www;
            default_type application/grpc;
            add_trailer grpc-status 0;
            try_files /reply.bin =404;
            error_page 405 =200 /reply.bin;
        }
    }
}
EOF
    } >"$BENCH_TMP/grpc-backend.conf"
    _start_nginx grpc-backend "$BENCH_TMP/grpc-backend.conf" "$check"
    GRPC_BACKEND_PID=$NGINX_PID
}

# start_nginx_grpc PORT CHECK_PORT GRPC_PORT [WORKERS]: the nginx peer of the gRPC cases (`grpc_pass` over h2c to the
# backend on GRPC_PORT, upstream keep-alive: nginx carries one call per upstream connection, so the cache holds 1,024,
# more than grpc.sh's 640 calls in flight), under NGINX_WRAPPER if set; ready when its HTTP/1.1 listener on CHECK_PORT
# answers /ready. Sets NGINX_PROXY_PID.
start_nginx_grpc() {
    local port="$1" check="$2" upstream="$3" workers="${4:-1}"
    mkdir -p "$BENCH_TMP/nginx-grpc"
    {
        _nginx_common nginx-grpc "$workers"
        echo "http {"
        _nginx_http_common nginx-grpc
        cat <<EOF
    upstream g {
        server 127.0.0.1:$upstream;
        keepalive 1024;
    }
    server {
        listen 127.0.0.1:$port http2 backlog=4096;
        listen 127.0.0.1:$check;
        keepalive_requests 1000000;
        location / { grpc_pass grpc://g; }
        location = /ready { return 200 "ok\n"; }
    }
}
EOF
    } >"$BENCH_TMP/nginx-grpc.conf"
    nginx -t -q -p "$BENCH_TMP/nginx-grpc" -e "$BENCH_TMP/nginx-grpc/err.log" -c "$BENCH_TMP/nginx-grpc.conf" \
        || die "the grpc_pass peer's config is invalid (see $BENCH_TMP/nginx-grpc/err.log)"
    ${NGINX_WRAPPER:-} nginx -p "$BENCH_TMP/nginx-grpc" -e "$BENCH_TMP/nginx-grpc/err.log" -c "$BENCH_TMP/nginx-grpc.conf" \
        >"$BENCH_TMP/nginx-grpc/stdout.log" 2>"$BENCH_TMP/nginx-grpc/stderr.log" &
    NGINX_PROXY_PID=$!
    BENCH_PIDS+=("$NGINX_PROXY_PID")
    wait_http "http://127.0.0.1:$check/ready" "${NGINX_START_TIMEOUT:-15}" "$NGINX_PROXY_PID" \
        || die "the grpc_pass peer did not come up: $(cat "$BENCH_TMP/nginx-grpc/err.log" 2>/dev/null)"
}

# write_gateway_config FILE PORT ADMIN_PORT BACKEND_PORT THREADS [ROUTE_YAML]
# ROUTE_YAML defaults to one `off` route on prefix /. Later cases (enforce, replay) pass their own routes and
# add settings through GATEWAY_SERVER_YAML (keys under server:, e.g. tls, indented 2 spaces),
# GATEWAY_APP_CHECK_YAML (keys under app_check:, indented 2 spaces) and GATEWAY_EXTRA_YAML (top-level keys such
# as replay:, appended verbatim).
write_gateway_config() {
    local file="$1" port="$2" admin="$3" backend="$4" threads="$5"
    local default_route='  - { name: bench, prefix: /, upstream: api, enforcement: off }'
    local routes="${6:-$default_route}"
    cat >"$file" <<EOF
# generated by Benchmarks/lib.sh
server:
  listen: ["127.0.0.1:$port"]
  admin_listen: "127.0.0.1:$admin"
  threads: $threads
${GATEWAY_SERVER_YAML:-}
  log_level: warning      # access logs are INFO lines; benchmarks run at warning (stdout also goes to a file)
  limits:
    max_connections: 20000
    idle_timeout: 120s
app_check:
  project_number: "123456789012"
${GATEWAY_APP_CHECK_YAML:-}
upstreams:
  api: { url: "http://127.0.0.1:$backend", max_idle_connections: 1024 }
routes:
$routes
${GATEWAY_EXTRA_YAML:-}
EOF
}

# start_gateway CONFIG ADMIN_PORT [WRAPPER...]: starts the gateway (optionally under a wrapper such as
# valgrind) and waits for /healthz. Sets GATEWAY_PID (the wrapper's pid when wrapped: valgrind runs the
# program in its own process). stdout/stderr go to $BENCH_TMP/gateway.{stdout,stderr}.log.
start_gateway() {
    local conf="$1" admin="$2"; shift 2
    [[ -x "$GATEWAY_BIN" ]] || die "no gateway binary at $GATEWAY_BIN (run 'make release' first)"
    "$@" "$GATEWAY_BIN" serve --config "$conf" \
        >>"$BENCH_TMP/gateway.stdout.log" 2>>"$BENCH_TMP/gateway.stderr.log" &
    GATEWAY_PID=$!
    BENCH_PIDS+=("$GATEWAY_PID")
    wait_http "http://127.0.0.1:$admin/healthz" "${GATEWAY_START_TIMEOUT:-30}" "$GATEWAY_PID" || {
        log "gateway stderr:"; tail -n 30 "$BENCH_TMP/gateway.stderr.log" >&2 || true
        die "gateway did not become healthy on admin port $admin"
    }
}

# ---- The soak's backend, keys and issuer (Benchmarks/soak.sh; defects.sh --memory) --------------------------
# soak_backend_up PORT: the soak's backend and keys, once per script. The backend is nginx, 1 worker: `ok` for
# everything, 10 MB at /big (zero-window streams), uploads up to 20 MB read and discarded. Keys: a verifier key
# and a session token for the enforce route (TOKEN, 7 days), the issuer's own signing key, and a backend key that
# signs custom tokens (Node's crypto: docs/examples/custom-token/mint.mjs). Sets BACKEND_PID, TOKEN, SOAK_APP (one
# app with App Attest, the hostile CBOR's target), SOAK_SECRET (its debug secret), ISSUER_URL,
# GATEWAY_APP_CHECK_YAML and GATEWAY_EXTRA_YAML (the issuer: section), and exports SOAK_CUSTOM_TOKEN_CMD (prints a
# fresh custom token; soak_attacks.py's custom-replay reads it).
soak_backend_up() {
    local port="$1"
    command -v nginx >/dev/null || die "nginx not found (make bench installs it)"
    command -v node >/dev/null || die "node not found (it signs the custom tokens)"
    head -c 10000000 /dev/zero | tr '\0' b >"$BENCH_TMP/big.bin"
    start_backend "$port" "        client_max_body_size 20m;
        location = /big { alias $BENCH_TMP/big.bin; }"

    "$GATEWAY_BIN" keygen --key "$BENCH_TMP/key.pem" --jwks "$BENCH_TMP/jwks.json" >/dev/null
    TOKEN="$("$GATEWAY_BIN" mint --key "$BENCH_TMP/key.pem" --project-number 123456789012 \
        --app-id 1:123456789012:ios:abc123 --ttl 7d)"
    GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$BENCH_TMP/jwks.json\" }"
    "$GATEWAY_BIN" keygen --key "$BENCH_TMP/issuer.pem" --jwks "$BENCH_TMP/issuer-jwks.json" >/dev/null
    "$GATEWAY_BIN" keygen --key "$BENCH_TMP/backend.pem" --jwks "$BENCH_TMP/backend-jwks.json" --kid backend-1 >/dev/null
    SOAK_APP="1:123456789012:ios:0a1b2c3d4e5f6a7b"
    SOAK_SECRET="soak-debug-secret-0123456789abcdef"
    ISSUER_URL="https://soak.example/appcheck"
    export SOAK_CUSTOM_TOKEN_CMD="node '$REPO_ROOT/docs/examples/custom-token/mint.mjs' '$BENCH_TMP/backend.pem' backend-1 backend@soak '$ISSUER_URL' '$SOAK_APP'"
    GATEWAY_EXTRA_YAML="$(cat <<EOF
issuer:
  issuer_url: $ISSUER_URL
  signing_keys: [$BENCH_TMP/issuer.pem]
  custom_token_issuers:
    - { iss: backend@soak, jwks_url: "file://$BENCH_TMP/backend-jwks.json" }
  apps:
    - app_id: "$SOAK_APP"
      team_id: ABCDE12345
      bundle_id: com.example.soak
      app_attest: { environments: [production] }
      debug_secrets: ["$SOAK_SECRET"]
EOF
)"
}

# soak_gateway_up CONFIG PORT ADMIN_PORT BACKEND_PORT: the soak's gateway (after soak_backend_up), 2 threads, an
# `enforce` route on /api/ and an `off` route on / that takes bodies up to 20 MiB, the issuer on. Writes CONFIG,
# starts it and waits for /healthz; sets GATEWAY_PID.
soak_gateway_up() {
    local conf="$1" port="$2" admin="$3" backend="$4"
    write_gateway_config "$conf" "$port" "$admin" "$backend" 2 "$(cat <<EOF
  - { name: api, prefix: /api/, upstream: api, enforcement: enforce }
  - { name: open, prefix: /, upstream: api, enforcement: off, max_body_bytes: 20MiB }
EOF
)"
    start_gateway "$conf" "$admin"
}

# rss_kib PID: VmRSS of PID in KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# ---- HAProxy with jwt_verify: the verifying peer (issue 24) ------------------------------------------------
# start_haproxy PORT BACKEND_PORT PUBKEY_PEM PROJECT_NUMBER: HAProxy (Debian's 2.6 package), one thread
# (`nbthread 1`), `http-reuse always` to the same static nginx backend, and a frontend that on every request
# takes the token from X-Firebase-AppCheck and answers 401 unless its header's alg is RS256, unless
# jwt_verify("RS256", PUBKEY_PEM) returns 1, unless its iss is the Firebase issuer of PROJECT_NUMBER, unless it
# has an exp, and if exp - date() is negative. One key per rule and no verified-token cache: every request is a
# full RSA verification. No logging (like the nginx peer's `access_log off`). Sets HAPROXY_PID.
start_haproxy() {
    local port="$1" backend="$2" pub="$3" project="$4" dir="$BENCH_TMP/haproxy"
    local conf="$dir/haproxy.cfg" iss="https://firebaseappcheck.googleapis.com/$4"
    mkdir -p "$dir"
    cat >"$conf" <<EOF2
# generated by Benchmarks/lib.sh (start_haproxy)
global
    nbthread 1
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 300s
    timeout http-request 30s
frontend appcheck
    bind 127.0.0.1:$port backlog 4096
    http-request set-var(txn.tok) req.hdr(X-Firebase-AppCheck)
    http-request set-var(txn.now) date()
    http-request deny deny_status 401 unless { var(txn.tok),jwt_header_query('\$.alg') -m str RS256 }
    http-request deny deny_status 401 unless { var(txn.tok),jwt_verify("RS256","$pub") -m int 1 }
    http-request deny deny_status 401 unless { var(txn.tok),jwt_payload_query('\$.iss') -m str $iss }
    http-request set-var(txn.exp) var(txn.tok),jwt_payload_query('\$.exp','int')
    http-request deny deny_status 401 unless { var(txn.exp) -m found }
    http-request deny deny_status 401 if { var(txn.exp),sub(txn.now) -m int lt 0 }
    default_backend static
backend static
    http-reuse always
    server b 127.0.0.1:$backend maxconn 1024
EOF2
    haproxy -c -q -f "$conf" >"$dir/check.log" 2>&1 || die "haproxy config $conf is invalid: $(cat "$dir/check.log")"
    ${HAPROXY_WRAPPER:-} haproxy -db -f "$conf" >"$dir/stdout.log" 2>"$dir/stderr.log" &
    HAPROXY_PID=$!
    BENCH_PIDS+=("$HAPROXY_PID")
    local deadline=$((SECONDS + ${HAPROXY_START_TIMEOUT:-15}))
    until python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' "$port" 2>/dev/null; do
        kill -0 "$HAPROXY_PID" 2>/dev/null || die "haproxy exited: $(cat "$dir/stderr.log")"
        ((SECONDS < deadline)) || die "haproxy did not listen on $port: $(cat "$dir/stderr.log")"
        sleep 0.2
    done
}

# token_status URL [TOKEN]: the status code of a GET with X-Firebase-AppCheck: TOKEN (no header without TOKEN).
token_status() {
    python3 - "$@" <<'PY'
import ssl, sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2: req.add_header("X-Firebase-AppCheck", sys.argv[2])
try:
    with urllib.request.urlopen(req, timeout=5, context=ssl._create_unverified_context()) as r: print(r.status)
except urllib.error.HTTPError as e: print(e.code)
except Exception as e: print("ERR", e)
PY
}

# verifier_sanity NAME URL GOOD_TOKEN SIGNING_KEY: before any measurement, a verifier must accept GOOD_TOKEN
# (200), and the same claims re-signed by the forger (200), and refuse (401) no token, a token whose payload was changed under its signature, one signed by
# another key, one with alg "none", an expired one and one of another issuer (the last two correctly signed
# with SIGNING_KEY). Dies otherwise: a peer that lets bad tokens through would not be a peer.
verifier_sanity() {
    local name="$1" url="$2" good="$3" key="$4" kind got bad=() other="$BENCH_TMP/other-key.pem"
    [[ -s "$other" ]] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$other" 2>/dev/null \
        || die "openssl could not make a second key"
    got="$(token_status "$url" "$good")"; [[ "$got" == 200 ]] || bad+=("good token -> $got")
    got="$(token_status "$url")"; [[ "$got" == 401 ]] || bad+=("no token -> $got")
    # The forger's own control: the same claims re-signed with SIGNING_KEY must pass, so the refusals below are
    # for what each forgery changed, not for a broken signature.
    got="$(token_status "$url" "$(python3 "$BENCH_DIR/jwt_forge.py" "$good" "$key" other-key)")"
    [[ "$got" == 200 ]] || bad+=("re-signed good token -> $got")
    for kind in bad-sig other-key alg-none expired wrong-iss; do
        local k="$key"; [[ "$kind" == other-key ]] && k="$other"
        got="$(token_status "$url" "$(python3 "$BENCH_DIR/jwt_forge.py" "$good" "$k" "$kind")")"
        [[ "$got" == 401 ]] || bad+=("$kind token -> $got")
    done
    ((${#bad[@]} == 0)) || die "$name at $url does not verify honestly: ${bad[*]}"
    log "$name: accepts a good token, refuses none/bad-sig/other-key/alg-none/expired/wrong-iss with 401"
}
