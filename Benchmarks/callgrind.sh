#!/usr/bin/env bash
# Instructions per request under valgrind --tool=callgrind (threads 1), the gateway and nginx on the same workload.
#
# usage: Benchmarks/callgrind.sh [--requests 20000] [--warmup 2000] [--top 25] [--cases off,enforce] [--no-nginx]
#
# Wall-clock numbers on a shared 2-core machine are noisy; instruction counts for a fixed number of requests
# are repeatable to well under 1%, so compare these figures before/after a change. The measured window is
# exactly the N requests: counters are zeroed (callgrind_control -z) after start-up and the warm-up requests,
# and dumped (callgrind_control -d) right after the last response. One keep-alive connection, sequential
# requests (Benchmarks/kaclient.py), static nginx backend. Cases:
#   off      an `enforcement: off` route, no token
#   enforce  an `enforcement: enforce` route, the same valid session token on every request (a token-cache hit
#            after the first), key set from a local issuer (keygen)
# The nginx peer (1 process, `proxy_pass` with upstream keep-alive, Benchmarks/lib.sh) runs under callgrind on the
# same requests, token header included, so the ratio is measured in the same run. Needs `make release` first.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS=20000
WARMUP=2000
TOP=25
CASES="off,enforce"
NGINX=1
while (($#)); do
    case "$1" in
        --requests) REQUESTS="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --top) TOP="$2"; shift 2 ;;
        --cases) CASES="$2"; shift 2 ;;
        --no-nginx) NGINX=0; shift ;;
        -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for c in ${CASES//,/ }; do
    [[ "$c" == off || "$c" == enforce ]] || { echo "unknown case: $c (off, enforce)" >&2; exit 2; }
done
for tool in objcopy valgrind callgrind_control callgrind_annotate nginx python3; do
    command -v "$tool" >/dev/null || die "$tool not found (make bench installs valgrind and nginx-light)"
done

bench_init
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT_DIR="$BENCH_DIR/out"
mkdir -p "$OUT_DIR"
read -r BACKEND_PORT GATEWAY_PORT ADMIN_PORT NGINX_PORT <<<"$(free_ports 4)"
PROJECT_NUMBER=123456789012
start_backend "$BACKEND_PORT"

# Valgrind 3.19 (bookworm) cannot read the DWARF 5 debug info Swift emits ("unhandled dwarf2 abbrev form
# code 0x25 ... I can't recover"), so profile a copy with the debug sections stripped; the symbol table stays,
# so function names still resolve.
objcopy --strip-debug "$GATEWAY_BIN" "$BENCH_TMP/appcheck-gateway"
REAL_BIN="$GATEWAY_BIN"
TOKEN=""
if [[ ",$CASES," == *,enforce,* ]]; then
    "$REAL_BIN" keygen --key "$BENCH_TMP/key.pem" --jwks "$BENCH_TMP/jwks.json" >&2 || die "keygen failed"
    TOKEN="$("$REAL_BIN" mint --key "$BENCH_TMP/key.pem" --project-number "$PROJECT_NUMBER" \
        --app-id "1:$PROJECT_NUMBER:ios:0123456789abcdef" | head -n 1)"
    [[ -n "$TOKEN" ]] || die "mint printed no token"
fi

# measure NAME PID PORT [HEADER]: warm-up, zero, N requests, dump; prints the instructions per request and keeps
# the profile as $OUT_DIR/callgrind-$STAMP-NAME.out (sets LAST_PROFILE).
measure() {
    local name="$1" pid="$2" port="$3" header="${4:-}" out="$5" dump ir
    local args=(--port "$port")
    [[ -n "$header" ]] && args+=(--header "$header")
    python3 "$BENCH_DIR/kaclient.py" "${args[@]}" --requests "$WARMUP" >/dev/null || die "$name: warm-up failed"
    callgrind_control -z "$pid" >/dev/null
    python3 "$BENCH_DIR/kaclient.py" "${args[@]}" --requests "$REQUESTS" >/dev/null || die "$name: requests failed"
    callgrind_control -d "$pid" >/dev/null
    dump="$(ls -t "$out.$pid".* 2>/dev/null | head -n 1 || true)"
    [[ -n "$dump" && -s "$dump" ]] || die "$name: no callgrind dump next to $out.$pid"
    ir="$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")"
    [[ -n "$ir" ]] || die "$name: no instruction total in $dump"
    LAST_PROFILE="$OUT_DIR/callgrind-$STAMP-$name.out"
    cp "$dump" "$LAST_PROFILE"
    awk -v ir="$ir" -v n="$REQUESTS" 'BEGIN { printf "%.0f", ir / n }'
}

declare -A GW NG PROFILE
for c in ${CASES//,/ }; do
    header=""
    route='  - { name: bench, prefix: /, upstream: api, enforcement: off }'
    if [[ "$c" == enforce ]]; then
        header="X-Firebase-AppCheck: $TOKEN"
        route='  - { name: bench, prefix: /, upstream: api, enforcement: enforce }'
        GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$BENCH_TMP/jwks.json\" }" \
            write_gateway_config "$BENCH_TMP/gateway-$c.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" 1 "$route"
    else
        write_gateway_config "$BENCH_TMP/gateway-$c.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" 1 "$route"
    fi
    CG_OUT="$BENCH_TMP/callgrind-gw-$c.out"
    log "gateway, $c: starting under callgrind (slow start-up is normal)"
    GATEWAY_BIN="$BENCH_TMP/appcheck-gateway" GATEWAY_START_TIMEOUT=180 start_gateway "$BENCH_TMP/gateway-$c.yaml" "$ADMIN_PORT" \
        valgrind --tool=callgrind --callgrind-out-file="$CG_OUT.%p" --dump-instr=no --vgdb=yes
    GW[$c]="$(measure "gateway-$c" "$GATEWAY_PID" "$GATEWAY_PORT" "$header" "$CG_OUT")"
    PROFILE[$c]="$OUT_DIR/callgrind-$STAMP-gateway-$c.out"
    stop_pid "$GATEWAY_PID"
    if ((NGINX)); then
        CG_OUT="$BENCH_TMP/callgrind-nginx-$c.out"
        log "nginx, $c: starting under callgrind"
        NGINX_MASTER_PROCESS=off NGINX_START_TIMEOUT=120 \
            NGINX_WRAPPER="valgrind --tool=callgrind --callgrind-out-file=$CG_OUT.%p --dump-instr=no --vgdb=yes" \
            start_nginx_proxy "$NGINX_PORT" "$BACKEND_PORT" 1
        NG[$c]="$(measure "nginx-$c" "$NGINX_PROXY_PID" "$NGINX_PORT" "$header" "$CG_OUT")"
        stop_pid "$NGINX_PROXY_PID"
    fi
done

echo
echo "gateway $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO_ROOT" diff --quiet 2>/dev/null || echo '+dirty'), threads 1, $REQUESTS requests after $WARMUP warm-up, one keep-alive connection"
echo
echo "| case | gateway Ir/request | nginx Ir/request | ratio |"
echo "|---|---:|---:|---:|"
for c in ${CASES//,/ }; do
    if ((NGINX)); then
        awk -v c="$c" -v g="${GW[$c]}" -v n="${NG[$c]}" 'BEGIN { printf "| %s | %d | %d | %.2f |\n", c, g, n, g / n }'
    else
        echo "| $c | ${GW[$c]} | - | - |"
    fi
done

DEMANGLE=cat
if command -v swift-demangle >/dev/null; then DEMANGLE="swift-demangle --simplified"
elif [[ -x "$(dirname "$(readlink -f "$(command -v swift 2>/dev/null || echo /nonexistent)")")/swift-demangle" ]]; then
    DEMANGLE="$(dirname "$(readlink -f "$(command -v swift)")")/swift-demangle --simplified"
fi
for c in ${CASES//,/ }; do
    echo
    echo "gateway, $c: top $TOP functions by self Ir in the measured window (thread entry frames that show 100% are left out):"
    callgrind_annotate --inclusive=no --threshold=100 "${PROFILE[$c]}" 2>/dev/null \
        | awk '/^-+$/ { sep++; next } sep >= 4 && NF && !/\(100\.0%\)/' | head -n "$TOP" | $DEMANGLE | cut -c1-200
done
echo
log "profiles kept in $OUT_DIR/callgrind-$STAMP-*.out (open with callgrind_annotate or kcachegrind)"
