#!/usr/bin/env bash
# AppCheck Gateway benchmarks: the gateway against nginx (proxy_pass) in front of the same static backend, on
# loopback, measured in the same run. See Benchmarks/README.md.
#
# usage: Benchmarks/run.sh [--duration SECONDS] [--rounds R] [--quick] [--threads "1 2"] [--no-rss]
# Run from anywhere after `make release` (or `swift build -c release --product appcheck-gateway`).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DURATION=""
ROUNDS=""
THREADS_LIST="1 2"
QUICK=0
RUN_RSS=1
IDLE_CONNECTIONS=10000
RSS_TARGET_MIB=100
WRK_CONNECTIONS=64

usage() { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
    case "$1" in
        --duration) DURATION="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --threads) THREADS_LIST="$2"; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --no-rss) RUN_RSS=0; shift ;;
        -h|--help) usage 0 ;;
        *) echo "unknown argument: $1" >&2; usage 2 ;;
    esac
done
# --quick: shorter runs, 2 rounds, threads 1 only. The idle-connection RSS case stays (it takes ~10 s).
if ((QUICK)); then
    DURATION="${DURATION:-3}"; ROUNDS="${ROUNDS:-2}"; THREADS_LIST="1"
fi
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-3}"
[[ "$DURATION" =~ ^[0-9]+$ && "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 2 ]] \
    || die "--duration must be whole seconds and --rounds at least 2"
for tool in wrk nginx python3; do
    command -v "$tool" >/dev/null || die "$tool not found (make bench installs wrk nginx-light nghttp2-client valgrind)"
done

bench_init
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT_DIR="$BENCH_DIR/out"
RAW_DIR="$OUT_DIR/raw-$STAMP"
mkdir -p "$RAW_DIR"
RESULTS_MD="$OUT_DIR/results-$STAMP.md"
ROWS=()          # markdown table rows, one per case
NOTES=()         # anomalies (errors, non-2xx, crashes) reported under the table

read -r BACKEND_PORT NGINX_PORT GATEWAY_PORT ADMIN_PORT <<<"$(free_ports 4)"
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
if awk -v l="${LOAD_START%% *}" -v c="$(nproc)" 'BEGIN { exit !(l > c / 2) }'; then
    log "WARNING: load average $LOAD_START on $(nproc) cores before starting: other work will distort the numbers"
fi
log "ports: backend $BACKEND_PORT, nginx $NGINX_PORT, gateway $GATEWAY_PORT (admin $ADMIN_PORT); tmp $BENCH_TMP"
log "duration ${DURATION}s x $ROUNDS rounds per proxy, wrk -t1 -c$WRK_CONNECTIONS; threads: $THREADS_LIST; open files $BENCH_NOFILE"

# ---------------------------------------------------------------------------------------------------------
# wrk output parsing

# to_ms VALUE: wrk latency ("812.00us", "1.23ms", "1.02s", "1.00m") in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000; else if (u == "h") n *= 3600000
        printf "%.3f", n }'
}

# parse_wrk FILE: prints "RPS P50_MS P99_MS ERRORS" (ERRORS = non-2xx/3xx + socket errors).
parse_wrk() {
    local f="$1" rps p50 p99 non2xx sock
    rps="$(awk '/^Requests\/sec:/ { print $2 }' "$f")"
    p50="$(awk '$1 == "50%" { print $2; exit }' "$f")"
    p99="$(awk '$1 == "99%" { print $2; exit }' "$f")"
    non2xx="$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$f")"
    sock="$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' "$f")"
    [[ -n "$rps" && -n "$p50" && -n "$p99" ]] || { echo "0 0 0 -1"; return; }
    echo "$rps $(to_ms "$p50") $(to_ms "$p99") $(( ${non2xx:-0} + ${sock:-0} ))"
}

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# ---------------------------------------------------------------------------------------------------------
# one load run

# run_wrk NAME URL OUTFILE [wrk args...]: one bounded wrk run with --latency.
run_wrk() {
    local name="$1" url="$2" out="$3"; shift 3
    wrk -t1 -c"$WRK_CONNECTIONS" -d"${DURATION}s" --timeout 5s --latency "$@" "$url" >"$out" 2>&1 || {
        NOTES+=("wrk failed for $name (see $out)"); return 0; }
}

# check_alive NAME PID LOGFILE: notes a crash of a proxy under test.
check_alive() {
    if ! kill -0 "$2" 2>/dev/null; then
        NOTES+=("$1 (pid $2) died during the run; last stderr: $(tail -n 5 "$3" 2>/dev/null | tr '\n' ' ')")
        return 1
    fi
}

# compare_case CASE NGINX_URL GATEWAY_URL [wrk args...]: alternates nginx, gateway, nginx, gateway ... for
# ROUNDS rounds, takes the median of each metric per proxy, and appends a table row.
compare_case() {
    local case="$1" nurl="$2" gurl="$3"; shift 3
    local r proxy url f a b c d
    local -A rps p50 p99 errs
    log "case '$case': warm-up (1 s each, not counted)"
    wrk -t1 -c"$WRK_CONNECTIONS" -d1s "$@" "$nurl" >/dev/null 2>&1 || true
    wrk -t1 -c"$WRK_CONNECTIONS" -d1s "$@" "$gurl" >/dev/null 2>&1 || true
    for ((r = 1; r <= ROUNDS; r++)); do
        for proxy in nginx gateway; do
            [[ $proxy == nginx ]] && url="$nurl" || url="$gurl"
            f="$RAW_DIR/${case// /_}-$proxy-$r.txt"
            run_wrk "$case/$proxy" "$url" "$f" "$@"
            read -r a b c d <<<"$(parse_wrk "$f")"
            log "  round $r $proxy: $a req/s, p50 ${b} ms, p99 ${c} ms, errors $d"
            rps[$proxy]+="$a "; p50[$proxy]+="$b "; p99[$proxy]+="$c "
            errs[$proxy]=$(( ${errs[$proxy]:-0} + (d < 0 ? 0 : d) ))
            if ((d != 0)); then
                NOTES+=("$case/$proxy round $r: $(grep -E 'Non-2xx|Socket errors' "$f" | tr '\n' ';' || true) (raw: $f)")
                if ((d < 0)); then
                    NOTES+=("$case/$proxy round $r: could not parse wrk output: $(head -c 300 "$f" | tr '\n' ' ')")
                fi
            fi
        done
        check_alive gateway "$GATEWAY_PID" "$BENCH_TMP/gateway.stderr.log" || break
        check_alive nginx "$NGINX_PROXY_PID" "$BENCH_TMP/nginx-proxy/err.log" || break
    done
    local nr np50 np99 gr gp50 gp99
    nr=$(tr ' ' '\n' <<<"${rps[nginx]}" | grep . | median);   gr=$(tr ' ' '\n' <<<"${rps[gateway]}" | grep . | median)
    np50=$(tr ' ' '\n' <<<"${p50[nginx]}" | grep . | median); gp50=$(tr ' ' '\n' <<<"${p50[gateway]}" | grep . | median)
    np99=$(tr ' ' '\n' <<<"${p99[nginx]}" | grep . | median); gp99=$(tr ' ' '\n' <<<"${p99[gateway]}" | grep . | median)
    local spread
    for proxy in nginx gateway; do
        spread=$(tr ' ' '\n' <<<"${rps[$proxy]}" | grep . | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (lo > 0) printf "%.0f", (hi / lo - 1) * 100; else print 0 }')
        if ((spread > 15)); then
            NOTES+=("$case/$proxy: req/s varied by ${spread}% between rounds ($(xargs <<<"${rps[$proxy]}")) -- the machine was busy; rerun with more --rounds or when it is idle")
        fi
    done
    local tr_ratio p99_ratio
    tr_ratio=$(awk -v g="$gr" -v n="$nr" 'BEGIN { if (n > 0) printf "%.2f", g / n; else print "n/a" }')
    p99_ratio=$(awk -v g="$gp99" -v n="$np99" 'BEGIN { if (n > 0) printf "%.2f", g / n; else print "n/a" }')
    ROWS+=("$(printf '| %s | %.0f | %.3f | %.3f | %.0f | %.3f | %.3f | %s | %s | %s / %s |' \
        "$case" "$nr" "$np50" "$np99" "$gr" "$gp50" "$gp99" "$tr_ratio" "$p99_ratio" "${errs[nginx]:-0}" "${errs[gateway]:-0}")")
}

# ---------------------------------------------------------------------------------------------------------
# cases

# proxies_up THREADS: (re)starts the nginx peer and the gateway with THREADS workers/threads.
proxies_up() {
    local n="$1"
    [[ -n "${NGINX_PROXY_PID:-}" ]] && stop_pid "$NGINX_PROXY_PID"
    [[ -n "${GATEWAY_PID:-}" ]] && stop_pid "$GATEWAY_PID"
    NGINX_PROXY_PID=""; GATEWAY_PID=""
    start_nginx_proxy "$NGINX_PORT" "$BACKEND_PORT" "$n"
    write_gateway_config "$BENCH_TMP/gateway-$n.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" "$n"
    start_gateway "$BENCH_TMP/gateway-$n.yaml" "$ADMIN_PORT"
    local nb gb
    nb="$(http_body "http://127.0.0.1:$NGINX_PORT/")"; gb="$(http_body "http://127.0.0.1:$GATEWAY_PORT/")"
    [[ "$nb" == '200 ok' && "$gb" == '200 ok' ]] \
        || die "sanity check failed: nginx answered '$nb', gateway answered '$gb'"
}

# Case: `off` route (no token work): the proxy path itself -- parse, route, pooled upstream, relay.
case_off_route() {
    local n="$1"
    proxies_up "$n"
    compare_case "off route, threads $n" "http://127.0.0.1:$NGINX_PORT/" "http://127.0.0.1:$GATEWAY_PORT/"
}

# ---- Extension points (not implemented yet) -------------------------------------------------------------
# Each later case should: write its gateway config (write_gateway_config with its own routes plus
# GATEWAY_APP_CHECK_YAML / GATEWAY_EXTRA_YAML), restart the gateway, and call compare_case. nginx has no App
# Check, so its column stays the plain proxy_pass baseline: the ratio then shows the full cost of
# verification over a bare proxy.

# Case: enforce route, 1,000 session tokens cycled (the token cache hit path).
#   Needs: a local issuer (`appcheck-gateway keygen` + `mint`), app_check.jwks.url: file://..., 1,000 tokens in
#   a file, and:  compare_case "enforce, 1k cycled tokens" URLs -s "$BENCH_DIR/tokens.lua" -- FILE cycle 1
case_enforce_cycled_tokens() { log "TODO: enforce route with 1,000 cycled session tokens (tokens.lua cycle)"; }

# Case: a fresh token per request (every request pays a full RS256 verification; token cache all misses).
#   Needs: ~(expected req/s x duration x rounds) distinct tokens; tokens.lua unique mode (never repeats; the
#   thread stops and says so when its slice runs out -- size the file so that never happens).
case_fresh_token_per_request() { log "TODO: fresh token per request (tokens.lua unique)"; }

# Case: replay_protection routes with each store (memory | sqlite | redis on loopback), limited-use tokens.
#   Needs: limited-use tokens (mint --limited-use), tokens.lua unique mode, a redis-server on a free port.
case_replay_stores() { log "TODO: replay stores (memory, sqlite, redis) with unique limited-use tokens"; }

# Case: HTTP/2 over TLS with h2load (nghttp2-client) against the gateway's TLS listener and nginx `listen ssl
#   http2`, same certificate (generated with openssl into BENCH_TMP).
case_h2load_tls() { log "TODO: h2load over TLS (HTTP/2), gateway vs nginx"; }

# Case: resident memory with IDLE_CONNECTIONS idle keep-alive connections (gateway only, threads 1).
RSS_SUMMARY=""
case_idle_rss() {
    [[ -n "${NGINX_PROXY_PID:-}" ]] && { stop_pid "$NGINX_PROXY_PID"; NGINX_PROXY_PID=""; }
    [[ -n "${GATEWAY_PID:-}" ]] && { stop_pid "$GATEWAY_PID"; GATEWAY_PID=""; }
    write_gateway_config "$BENCH_TMP/gateway-rss.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" 1
    start_gateway "$BENCH_TMP/gateway-rss.yaml" "$ADMIN_PORT"
    log "case 'idle RSS': opening $IDLE_CONNECTIONS keep-alive connections to the gateway (threads 1)"
    local json rc=0
    json="$(python3 "$BENCH_DIR/idle_conns.py" --port "$GATEWAY_PORT" --pid "$GATEWAY_PID" \
        --count "$IDLE_CONNECTIONS" --admin "$ADMIN_PORT" 2> >(tee "$RAW_DIR/idle-rss.log" >&2))" || rc=$?
    echo "$json" >"$RAW_DIR/idle-rss.json"
    check_alive gateway "$GATEWAY_PID" "$BENCH_TMP/gateway.stderr.log" || true
    if [[ -z "$json" ]]; then
        RSS_SUMMARY="idle RSS case failed (exit $rc); see $RAW_DIR/idle-rss.log"
        NOTES+=("$RSS_SUMMARY"); return
    fi
    RSS_SUMMARY="$(python3 - "$json" "$RSS_TARGET_MIB" "$rc" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); target = float(sys.argv[2]); rc = int(sys.argv[3])
mib = lambda k: r[k] / 1024
verdict = "PASS" if mib("loaded_kib") < target and r["failures"] == 0 and rc == 0 else "FAIL"
print(f"| idle keep-alive connections | {r['connections']} (failures {r['failures']}, probes alive {r['probes_alive']}/{r['probes']}) |\n"
      f"| gateway VmRSS before | {mib('baseline_kib'):.1f} MiB |\n"
      f"| gateway VmRSS with connections | {mib('loaded_kib'):.1f} MiB (target < {target:.0f} MiB: {verdict}) |\n"
      f"| per connection | {r['per_connection_kib']:.2f} KiB |\n"
      f"| VmHWM / VmRSS after closing them | {mib('hwm_kib'):.1f} MiB / {mib('after_close_kib'):.1f} MiB "
      f"(RssAnon {mib('anon_after_close_kib'):.1f} MiB; {r['open_after_close']}) |\n"
      + "".join(f"| pass {i}: VmRSS with / after closing | {p['loaded'] / 1024:.1f} MiB / {p['after_close'] / 1024:.1f} MiB"
                f" ({p['connections']} connections, {p['failures']} failures) |\n" for i, p in enumerate(r["passes"][1:], start=2)) +
      f"| fd limits (client / gateway) | {r['client_nofile']} / {r['gateway_nofile']} |")
PY
)"
    ((rc == 0)) || NOTES+=("idle RSS case reported failures (exit $rc); see $RAW_DIR/idle-rss.log")
}

# ---------------------------------------------------------------------------------------------------------
# main

start_backend "$BACKEND_PORT"
for n in $THREADS_LIST; do
    case_off_route "$n"
done
case_enforce_cycled_tokens
case_fresh_token_per_request
case_replay_stores
case_h2load_tls
if ((RUN_RSS)); then case_idle_rss; fi

if [[ -s "$BENCH_TMP/gateway.stderr.log" ]]; then
    NOTES+=("gateway stderr (last lines): $(tail -n 10 "$BENCH_TMP/gateway.stderr.log" | tr '\n' ' ')")
fi
if grep -qi '"severity":"\(WARNING\|ERROR\)"' "$BENCH_TMP/gateway.stdout.log" 2>/dev/null; then
    NOTES+=("gateway logged warnings/errors: $(grep -i '"severity":"\(WARNING\|ERROR\)"' "$BENCH_TMP/gateway.stdout.log" | cut -c1-300 | sort | uniq -c | sort -rn | head -n 5 | tr '\n' ' ')")
fi

{
    echo "# AppCheck Gateway benchmark $(date -Iseconds)"
    echo
    echo "Host: $(nproc) cores, $(uname -r); gateway $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO_ROOT" diff --quiet 2>/dev/null || echo '+dirty'); $(nginx -v 2>&1); $(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2)."
    echo "Load average (1/5/15 min) at start: $LOAD_START; at end: $(cut -d' ' -f1-3 /proc/loadavg)."
    echo "Load: \`wrk -t1 -c$WRK_CONNECTIONS -d${DURATION}s --latency\`, nginx and gateway alternated, $ROUNDS rounds each;"
    echo "each figure is the **median** of the rounds (per metric). Gateway log_level warning. Latencies in ms."
    echo "Ratios are gateway/nginx: throughput > 1 means the gateway is faster; p99 < 1 means the gateway's tail is lower."
    echo
    echo "| case | nginx req/s | nginx p50 | nginx p99 | gateway req/s | gateway p50 | gateway p99 | throughput ratio | p99 ratio | errors nginx / gateway |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${ROWS[@]}"
    if [[ -n "$RSS_SUMMARY" ]]; then
        echo
        echo "| idle memory (gateway, threads 1, idle_timeout 120s) | |"
        echo "|---|---|"
        echo "$RSS_SUMMARY"
    fi
    if ((${#NOTES[@]})); then
        echo
        echo "Notes:"
        printf -- '- %s\n' "${NOTES[@]}"
    fi
    echo
    echo "Raw wrk output: ${RAW_DIR#"$REPO_ROOT"/}"
} | tee "$RESULTS_MD"
log "results written to $RESULTS_MD"
