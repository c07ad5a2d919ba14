#!/usr/bin/env bash
# gRPC unary throughput (issue 38): calls per second through the gateway's enforce route (one cached session token,
# an `h2` upstream over h2c) against nginx `grpc_pass`, both in front of the same gRPC upstream (nginx over h2c
# answering every call with one message and the trailer `grpc-status: 0`; lib.sh `start_grpc_backend`, the upstream of
# callgrind.sh's case G). Load: h2load -t1 -cCLIENTS -mSTREAMS -D DURATION POSTing a 7-byte gRPC message
# (`content-type: application/grpc`, `te: trailers`, the token). One worker / thread each. Each round runs nginx, then
# the gateway (alternating, so drift hits both alike); every figure is printed with the load average at its start,
# the median of the rounds at the end. Non-2xx answers and errored calls are counted per proxy (the errors column) and
# the first lines of that proxy's error log are shown; a run with any is not a clean comparison.
#
# usage: Benchmarks/grpc.sh [--duration 5] [--rounds 3] [--clients 64] [--streams 10]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=5
ROUNDS=3
CLIENTS=64
STREAMS=10
while (($#)); do
    case "$1" in
        --duration) DURATION="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --clients) CLIENTS="$2"; shift 2 ;;
        --streams) STREAMS="$2"; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for n in "$DURATION" "$ROUNDS" "$CLIENTS" "$STREAMS"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "numbers must be positive" >&2; exit 2; }
done
for tool in nginx h2load; do command -v "$tool" >/dev/null || die "$tool not found (make deps-bench)"; done
[[ -x "$GATEWAY_BIN" ]] || die "no gateway binary at $GATEWAY_BIN (run 'make release' first)"

bench_init
read -r GRPC_PORT GRPC_CHECK_PORT NGINX_PORT NGINX_CHECK_PORT GATEWAY_PORT ADMIN_PORT <<<"$(free_ports 6)"
start_grpc_backend "$GRPC_PORT" "$GRPC_CHECK_PORT"

PROJECT_NUMBER=123456789012
APP_ID="1:$PROJECT_NUMBER:ios:0123456789abcdef"
"$GATEWAY_BIN" keygen --key "$BENCH_TMP/key.pem" --jwks "$BENCH_TMP/jwks.json" >/dev/null || die "keygen failed"
TOKEN="$("$GATEWAY_BIN" mint --key "$BENCH_TMP/key.pem" --project-number "$PROJECT_NUMBER" --app-id "$APP_ID" | head -n 1)"
[[ -n "$TOKEN" ]] || die "mint printed no token"

GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$BENCH_TMP/jwks.json\" }" \
    write_gateway_config "$BENCH_TMP/gateway.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$GRPC_PORT" 1 \
    '  - { name: bench, prefix: /, upstream: api, enforcement: enforce }'
sed -i "s|^  api: { url: \"http://127.0.0.1:$GRPC_PORT\", max_idle_connections: 1024 }|  api: { url: \"http://127.0.0.1:$GRPC_PORT\", protocol: h2 }|" \
    "$BENCH_TMP/gateway.yaml"
grep -q "protocol: h2" "$BENCH_TMP/gateway.yaml" || die "could not point the upstream at the h2c backend"

# run_h2load NAME PORT: one measured run after a 1 s warm-up; prints the calls per second.
run_h2load() {
    local name="$1" port="$2" out="$BENCH_TMP/h2load-$1.txt" rps
    local args=(-t1 -c"$CLIENTS" -m"$STREAMS" -d "$BENCH_TMP/grpc-request.bin" -H "content-type: application/grpc"
                -H "te: trailers" -H "x-firebase-appcheck: $TOKEN")
    timeout -k 5 30 h2load "${args[@]}" -D 1 "http://127.0.0.1:$port/bench.Echo/Say" >/dev/null 2>&1 || true
    timeout -k 5 $((DURATION + 60)) h2load "${args[@]}" -D "$DURATION" "http://127.0.0.1:$port/bench.Echo/Say" >"$out" 2>&1 \
        || { cat "$out" >&2; die "$name: h2load failed"; }
    # At the end of -D, h2load drops the calls still in flight: those are not failures of the proxy.
    local failed errored non2xx
    read -r failed errored <<<"$(sed -n 's/^requests: .* \([0-9]*\) failed, \([0-9]*\) errored.*/\1 \2/p' "$out")"
    non2xx="$(sed -n 's/^status codes: [0-9]* 2xx, \([0-9]*\) 3xx, \([0-9]*\) 4xx, \([0-9]*\) 5xx/\1 \2 \3/p' "$out" | awk '{ print $1 + $2 + $3 }')"
    rps="$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$out")"
    [[ -n "$rps" ]] || { cat "$out" >&2; die "$name: no req/s in h2load's output"; }
    if [[ "${non2xx:-0}" != 0 || "$errored" != 0 ]]; then
        log "$name: $non2xx non-2xx answers, $errored errored; its error log:"
        tail -n 5 "$BENCH_TMP/nginx-grpc/err.log" "$BENCH_TMP/gateway.stderr.log" 2>/dev/null >&2 || true
    fi
    echo $((${non2xx:-0} + ${errored:-0})) >>"$BENCH_TMP/errors-${name%-*}"
    log "$name: $rps calls/s (failed $failed: calls in flight at the end of the run)"
    printf '%.0f' "$rps"
}

declare -a NG GW
for ((r = 1; r <= ROUNDS; r++)); do
    start_nginx_grpc "$NGINX_PORT" "$NGINX_CHECK_PORT" "$GRPC_PORT"
    log "round $r, nginx grpc_pass (load $(cut -d' ' -f1-3 /proc/loadavg))"
    NG+=("$(run_h2load "nginx-$r" "$NGINX_PORT")")
    stop_pid "$NGINX_PROXY_PID"
    start_gateway "$BENCH_TMP/gateway.yaml" "$ADMIN_PORT"
    wait_http "http://127.0.0.1:$ADMIN_PORT/readyz" 30 "$GATEWAY_PID" || die "gateway never ready (key set)"
    log "round $r, gateway (load $(cut -d' ' -f1-3 /proc/loadavg))"
    GW+=("$(run_h2load "gateway-$r" "$GATEWAY_PORT")")
    stop_pid "$GATEWAY_PID"
done

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ng="$(median "${NG[@]}")"; gw="$(median "${GW[@]}")"
echo
echo "gRPC unary, h2load -c$CLIENTS -m$STREAMS, ${DURATION}s per round, $ROUNDS rounds (load at end: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
errors() { awk '{ s += $1 } END { print s + 0 }' "$BENCH_TMP/errors-$1" 2>/dev/null || echo 0; }
echo "| proxy | calls/s (median) | rounds | non-2xx + errored |"
echo "|---|---:|---|---:|"
echo "| nginx grpc_pass | $ng | ${NG[*]} | $(errors nginx) |"
echo "| gateway, enforce route, h2 upstream | $gw | ${GW[*]} | $(errors gateway) |"
awk -v g="$gw" -v n="$ng" 'BEGIN { printf "\ngateway / nginx: %.2f\n", g / n }'
