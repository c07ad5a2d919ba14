# Shared helpers for Benchmarks/run.sh and Benchmarks/callgrind.sh. Source it; do not run it.
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

# start_backend PORT: static nginx answering 200 "ok\n" to everything (1 worker). Sets BACKEND_PID.
start_backend() {
    local port="$1" conf="$BENCH_TMP/backend.conf"
    {
        _nginx_common backend 1
        echo "http {"
        _nginx_http_common backend
        cat <<EOF
    server {
        listen 127.0.0.1:$port backlog=4096;
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

# rss_kib PID: VmRSS of PID in KiB.
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
