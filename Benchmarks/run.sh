#!/usr/bin/env bash
# AppCheck Gateway benchmarks: the gateway against nginx (proxy_pass) in front of the same static backend, on
# loopback, measured in the same run. See Benchmarks/README.md.
#
# usage: Benchmarks/run.sh [--duration SECONDS] [--rounds R] [--quick] [--threads "1 2"] [--no-rss]
#            [--cases http1,enforce,fresh,replay,dpop,haproxy,h2,handshakes,rss] [--case-threads N] [--fresh-tokens N]
#            [--dpop-proofs N]
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
ALL_CASES="http1,enforce,fresh,replay,dpop,haproxy,h2,handshakes,rss"
CASES="$ALL_CASES"
CASE_THREADS=1          # gateway threads = nginx workers for the token/TLS cases
FRESH_TOKENS=""         # override the probe-based size of the fresh-token files
DPOP_PROOFS=""          # DPoP proofs per round of the dpop case (default 15,000 x duration)

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while (($#)); do
    case "$1" in
        --duration) DURATION="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --threads) THREADS_LIST="$2"; shift 2 ;;
        --quick) QUICK=1; shift ;;
        --no-rss) RUN_RSS=0; shift ;;
        --cases) CASES="$2"; shift 2 ;;
        --case-threads) CASE_THREADS="$2"; shift 2 ;;
        --fresh-tokens) FRESH_TOKENS="$2"; shift 2 ;;
        --dpop-proofs) DPOP_PROOFS="$2"; shift 2 ;;
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
[[ "$DURATION" =~ ^[0-9]+$ && "$DURATION" -ge 1 && "$ROUNDS" =~ ^[0-9]+$ && "$ROUNDS" -ge 1 ]] \
    || die "--duration must be whole seconds and --rounds at least 1"
[[ "$CASE_THREADS" =~ ^[1-9][0-9]*$ ]] || die "--case-threads must be a positive number"
[[ -z "$FRESH_TOKENS" || "$FRESH_TOKENS" =~ ^[1-9][0-9]*$ ]] || die "--fresh-tokens must be a positive number"
((RUN_RSS)) || CASES="$(tr ',' '\n' <<<"$CASES" | grep -vx rss | paste -sd, -)"
for c in ${CASES//,/ }; do
    [[ ",$ALL_CASES," == *",$c,"* ]] || die "unknown case '$c' in --cases (known: $ALL_CASES)"
done
want_case() { [[ ",$CASES," == *",$1,"* ]]; }
need_tools=(wrk nginx python3)
if want_case h2 || want_case handshakes; then need_tools+=(openssl); fi
if want_case replay; then need_tools+=(redis-server redis-cli); fi
if want_case h2; then need_tools+=(h2load); fi
if want_case haproxy; then need_tools+=(haproxy openssl); fi
for tool in "${need_tools[@]}"; do
    command -v "$tool" >/dev/null \
        || die "$tool not found (make bench installs wrk nginx-light haproxy nghttp2-client valgrind redis-server openssl)"
done

bench_init
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT_DIR="$BENCH_DIR/out"
RAW_DIR="$OUT_DIR/raw-$STAMP"
mkdir -p "$RAW_DIR"
RESULTS_MD="$OUT_DIR/results-$STAMP.md"
ROWS=()          # markdown table rows, one per case
HAPROXY_ROWS=()  # rows of the verifying-peer table (cases run with CMP_HAPROXY_URL)
NOTES=()         # anomalies (errors, non-2xx, crashes) reported under the table

read -r BACKEND_PORT NGINX_PORT GATEWAY_PORT ADMIN_PORT <<<"$(free_ports 4)"
LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
if awk -v l="${LOAD_START%% *}" -v c="$(nproc)" 'BEGIN { exit !(l > c / 2) }'; then
    log "WARNING: load average $LOAD_START on $(nproc) cores before starting: other work will distort the numbers"
fi
log "ports: backend $BACKEND_PORT, nginx $NGINX_PORT, gateway $GATEWAY_PORT (admin $ADMIN_PORT); tmp $BENCH_TMP"
log "duration ${DURATION}s x $ROUNDS rounds per proxy, wrk -t1 -c$WRK_CONNECTIONS; threads: $THREADS_LIST (token/TLS cases: $CASE_THREADS); cases: $CASES; open files $BENCH_NOFILE"

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

# h2load output parsing

# parse_h2load FILE: prints "RPS P50_MS P99_MS ERRORS" from h2load's summary ("finished in 3.00s, N req/s",
# "requests: ... N failed, N errored, N timeout", "status codes: N 2xx, N 3xx, N 4xx, N 5xx") and its per-request
# --log-file (FILE.log: start time, status, microseconds to the end of the response) for the percentiles.
# ERRORS = failed + errored + timeout + 3xx/4xx/5xx.
parse_h2load() {
    local f="$1" rps errs pct
    rps="$(awk '/^finished in/ { gsub(",", ""); print $4; exit }' "$f")"
    errs="$(awk '/^requests:/ { gsub(",", ""); e += $10 + $12 + $14 }
                 /^status codes:/ { gsub(",", ""); e += $5 + $7 + $9 }
                 END { print e + 0 }' "$f")"
    if [[ -s "$f.log" ]]; then
        pct="$(cut -f3 "$f.log" | sort -n | awk '{ a[NR] = $1 } END {
            if (NR == 0) { print "0 0"; exit }
            i50 = int(NR * 0.50); if (i50 < 1) i50 = 1; i99 = int(NR * 0.99); if (i99 < 1) i99 = 1
            printf "%.3f %.3f", a[i50] / 1000, a[i99] / 1000 }')"
    else
        pct="0 0"
    fi
    [[ -n "$rps" ]] || { echo "0 0 0 -1"; return; }
    echo "$rps $pct $errs"
}

# ---------------------------------------------------------------------------------------------------------
# one load run

# wrk_cmd URL [wrk options...] [-- script args...]: prints nothing; sets WRK_ARGV to the options, the URL, then
# `--` and the script's arguments (wrk takes the URL before the script's arguments).
wrk_cmd() {
    local url="$1"; shift
    local -a opts=() rest=()
    while (($#)); do
        if [[ "$1" == -- ]]; then rest=("$@"); break; fi
        opts+=("$1"); shift
    done
    WRK_ARGV=("${opts[@]}" "$url" "${rest[@]}")
}

# run_wrk NAME URL OUTFILE [wrk args...] [-- script args...]: one bounded wrk run with --latency.
run_wrk() {
    local name="$1" url="$2" out="$3"; shift 3
    wrk_cmd "$url" "$@"
    wrk -t1 -c"$WRK_CONNECTIONS" -d"${DURATION}s" --timeout 5s --latency "${WRK_ARGV[@]}" >"$out" 2>&1 || {
        NOTES+=("wrk failed for $name (see $out)"); return 0; }
}

# run_h2load NAME URL OUTFILE [h2load args...]: one bounded h2load run (-t1, -D DURATION, per-request log).
run_h2load() {
    local name="$1" url="$2" out="$3"; shift 3
    timeout -k 5 $((DURATION + 60)) h2load -t1 -D "$DURATION" --log-file "$out.log" "$@" "$url" >"$out" 2>&1 || {
        NOTES+=("h2load failed for $name (exit $?; see $out)"); return 0; }
}

# warm_up URL [load args...]: 1 s, unmeasured, with the current CMP_TOOL.
warm_up() {
    local url="$1"; shift
    if [[ "$CMP_TOOL" == h2load ]]; then
        timeout -k 5 30 h2load -t1 -D 1 "$@" "$url" >/dev/null 2>&1 || true
    else
        wrk_cmd "$url" "$@"
        wrk -t1 -c"$WRK_CONNECTIONS" -d1s "${WRK_ARGV[@]}" >/dev/null 2>&1 || true
    fi
}

# save_metrics FILE: the gateway's /metrics (for the per-case summaries).
save_metrics() {
    python3 - "http://127.0.0.1:$ADMIN_PORT/metrics" >"$1" 2>/dev/null <<'PY' || true
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
    sys.stdout.write(r.read().decode(errors="replace"))
PY
}

# metrics_summary FILE: one line: token cache hits/misses, App Check outcomes, rejections, replay store results.
metrics_summary() {
    awk '
        function lbl(k,   m) { if (match($0, k "=\"[^\"]*\"")) { m = substr($0, RSTART + length(k) + 2, RLENGTH - length(k) - 3); return m } return "" }
        /^appcheck_token_cache_total/ { cache[lbl("result")] += $NF }
        /^appcheck_requests_total/ { out[lbl("outcome")] += $NF }
        /^appcheck_rejections_total/ { rej[lbl("reason")] += $NF }
        /^appcheck_replay_store_total/ { rs[lbl("result")] += $NF }
        /^gateway_requests_total/ { st[lbl("status")] += $NF }
        END {
            s = "cache hit " cache["hit"] + 0 " miss " cache["miss"] + 0 "; outcomes"
            for (k in out) s = s " " k "=" out[k]
            s = s "; rejections"; n = 0
            for (k in rej) { s = s " " k "=" rej[k]; n++ }
            if (!n) s = s " none"
            if (length(rs)) { s = s "; replay store"; for (k in rs) s = s " " k "=" rs[k] }
            s = s "; statuses"; for (k in st) s = s " " k "=" st[k]
            print s
        }' "$1"
}

# Per-case options read by compare_case (reset_case_opts restores the defaults):
#   CMP_TOOL            wrk (default) | h2load
#   CMP_NGINX_ARGS      load-tool args for nginx runs   (default: compare_case's own trailing args)
#   CMP_GATEWAY_ARGS    load-tool args for gateway runs (default: compare_case's own trailing args)
#   CMP_GATEWAY_PREP    a function called as `PREP ROUND` before every measured gateway run; it owns the
#                       gateway's warm-up (compare_case does none): e.g. restart the gateway so its token cache
#                       and replay store are empty, then warm up with tokens the measured run will not send.
#   CMP_RATE_UNIT       what the rate column counts (for the notes only)
#   CMP_HAPROXY_URL     when set, HAProxy (jwt_verify) runs too, between nginx and the gateway in every round, and
#                       the case also gets a row in the verifying-peer table (gateway / HAProxy)
#   CMP_HAPROXY_ARGS    load-tool args for HAProxy runs (default: the nginx args)
reset_case_opts() { CMP_TOOL=wrk; CMP_NGINX_ARGS=(); CMP_GATEWAY_ARGS=(); CMP_GATEWAY_PREP=""; CMP_HAPROXY_URL=""; CMP_HAPROXY_ARGS=(); }
reset_case_opts

# CPU time (issue 38's profile): on a shared machine req/s moves with whatever else runs, while the CPU each proxy
# spends per request (user + system, kernel socket work included, which callgrind does not see) moves much less.
# cpu_ticks PID...: user + system clock ticks of those processes (all their threads) so far.
cpu_ticks() {
    local t=0 p
    for p in "$@"; do [[ -r "/proc/$p/stat" ]] && t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done
    echo "$t"
}
# proxy_pids PROXY: the processes that serve (nginx's workers, HAProxy and its workers, the gateway).
proxy_pids() {
    case "$1" in
        nginx) pgrep -P "$NGINX_PROXY_PID" | xargs ;;
        haproxy) echo "$HAPROXY_PID $(pgrep -P "$HAPROXY_PID" | xargs)" ;;
        *) echo "$GATEWAY_PID" ;;
    esac
}
# requests_done TOOL FILE: the requests the load tool completed (wrk: "N requests in", h2load: "requests: ... N done").
requests_done() {
    if [[ $1 == wrk ]]; then awk '/ requests in / { print $1; exit }' "$2"; else awk '/^requests:/ { print $6; exit }' "$2"; fi
}
CLK_TCK="$(getconf CLK_TCK)"

# check_alive NAME PID LOGFILE: notes a crash of a proxy under test.
check_alive() {
    if ! kill -0 "$2" 2>/dev/null; then
        NOTES+=("$1 (pid $2) died during the run; last stderr: $(tail -n 5 "$3" 2>/dev/null | tr '\n' ' ')")
        return 1
    fi
}

# compare_case CASE NGINX_URL GATEWAY_URL [load args...]: alternates nginx, gateway, nginx, gateway ... for
# ROUNDS rounds, takes the median of each metric per proxy, and appends a table row. See CMP_* above.
compare_case() {
    local case="$1" nurl="$2" gurl="$3"; shift 3
    local r proxy url f a b c d tag=""
    local -A rps p50 p99 errs cpu
    local pids t0 t1 n
    local -a nargs gargs hargs proxies=(nginx gateway)
    if ((${#CMP_NGINX_ARGS[@]})); then nargs=("${CMP_NGINX_ARGS[@]}"); else nargs=("$@"); fi
    if ((${#CMP_GATEWAY_ARGS[@]})); then gargs=("${CMP_GATEWAY_ARGS[@]}"); else gargs=("$@"); fi
    if ((${#CMP_HAPROXY_ARGS[@]})); then hargs=("${CMP_HAPROXY_ARGS[@]}"); else hargs=("${nargs[@]}"); fi
    [[ -z "$CMP_HAPROXY_URL" ]] || proxies=(nginx haproxy gateway)
    log "case '$case': warm-up (1 s each, not counted)"
    warm_up "$nurl" "${nargs[@]}"
    [[ -z "$CMP_HAPROXY_URL" ]] || warm_up "$CMP_HAPROXY_URL" "${hargs[@]}"
    [[ -n "$CMP_GATEWAY_PREP" ]] || warm_up "$gurl" "${gargs[@]}"
    for ((r = 1; r <= ROUNDS; r++)); do
        for proxy in "${proxies[@]}"; do
            f="$RAW_DIR/$(tr -cs 'A-Za-z0-9.=-' '_' <<<"$case" | sed 's/_*$//')-$proxy-$r.txt"
            if [[ $proxy == nginx ]]; then
                url="$nurl"
                pids="$(proxy_pids nginx)"; t0="$(cpu_ticks $pids)"
                "run_$CMP_TOOL" "$case/$proxy" "$url" "$f" "${nargs[@]}"
            elif [[ $proxy == haproxy ]]; then
                url="$CMP_HAPROXY_URL"
                pids="$(proxy_pids haproxy)"; t0="$(cpu_ticks $pids)"
                "run_$CMP_TOOL" "$case/$proxy" "$url" "$f" "${hargs[@]}"
            else
                url="$gurl"
                [[ -z "$CMP_GATEWAY_PREP" ]] || "$CMP_GATEWAY_PREP" "$r"
                pids="$(proxy_pids gateway)"; t0="$(cpu_ticks $pids)"
                "run_$CMP_TOOL" "$case/$proxy" "$url" "$f" "${gargs[@]}"
                t1="$(cpu_ticks $pids)"
                save_metrics "$f.metrics"
                log "  round $r gateway metrics: $(metrics_summary "$f.metrics")"
            fi
            [[ $proxy == gateway ]] || t1="$(cpu_ticks $pids)"
            n="$(requests_done "$CMP_TOOL" "$f")"
            # Microseconds of CPU per request (user + system), when the tool counted requests.
            [[ "${n:-0}" =~ ^[0-9]+$ && "$n" -gt 0 ]] \
                && cpu[$proxy]+="$(awk -v t=$((t1 - t0)) -v k="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.1f", t * 1e6 / k / n }') "
            read -r a b c d <<<"$("parse_$CMP_TOOL" "$f")"
            rm -f "$f.log"   # h2load's per-request log: large, only needed for the percentiles
            log "  round $r $proxy: $a req/s, p50 ${b} ms, p99 ${c} ms, errors $d, CPU $((t1 - t0)) ticks for ${n:-?} requests (load $(cut -d" " -f1-3 /proc/loadavg))"
            rps[$proxy]+="$a "; p50[$proxy]+="$b "; p99[$proxy]+="$c "
            errs[$proxy]=$(( ${errs[$proxy]:-0} + (d < 0 ? 0 : d) ))
            if ((d != 0)); then
                NOTES+=("$case/$proxy round $r: $(grep -E 'Non-2xx|Socket errors|^requests:|^status codes:' "$f" | tr '\n' ';' || true) (raw: $f)")
                if ((d < 0)); then
                    NOTES+=("$case/$proxy round $r: could not parse $CMP_TOOL output: $(head -c 300 "$f" | tr '\n' ' ')")
                fi
            fi
            if grep -q 'EXHAUSTED' "$f"; then
                tag=" **(tokens EXHAUSTED)**"
                NOTES+=("$case/$proxy round $r: tokens.lua ran out of tokens (EXHAUSTED) and stopped early: that round's req/s is too low; raise --fresh-tokens (raw: $f)")
            fi
            if grep -q 'WRAPPED' "$f"; then
                NOTES+=("$case/$proxy round $r: tokens.lua WRAPPED: tokens repeated (raw: $f)")
            fi
        done
        check_alive gateway "$GATEWAY_PID" "$BENCH_TMP/gateway.stderr.log" || break
        check_alive nginx "$NGINX_PROXY_PID" "$BENCH_TMP/nginx-proxy/err.log" || break
        [[ -z "$CMP_HAPROXY_URL" ]] || check_alive haproxy "$HAPROXY_PID" "$BENCH_TMP/haproxy/stderr.log" || break
    done
    local nr np50 np99 gr gp50 gp99
    nr=$(tr ' ' '\n' <<<"${rps[nginx]}" | grep . | median);   gr=$(tr ' ' '\n' <<<"${rps[gateway]}" | grep . | median)
    np50=$(tr ' ' '\n' <<<"${p50[nginx]}" | grep . | median); gp50=$(tr ' ' '\n' <<<"${p50[gateway]}" | grep . | median)
    np99=$(tr ' ' '\n' <<<"${p99[nginx]}" | grep . | median); gp99=$(tr ' ' '\n' <<<"${p99[gateway]}" | grep . | median)
    local spread
    for proxy in "${proxies[@]}"; do
        spread=$(tr ' ' '\n' <<<"${rps[$proxy]}" | grep . | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (lo > 0) printf "%.0f", (hi / lo - 1) * 100; else print 0 }')
        if ((spread > 15)); then
            NOTES+=("$case/$proxy: req/s varied by ${spread}% between rounds ($(xargs <<<"${rps[$proxy]}")) -- the machine was busy; rerun with more --rounds or when it is idle")
        fi
    done
    local tr_ratio p99_ratio ncpu gcpu cpu_ratio
    tr_ratio=$(awk -v g="$gr" -v n="$nr" 'BEGIN { if (n > 0) printf "%.2f", g / n; else print "n/a" }')
    p99_ratio=$(awk -v g="$gp99" -v n="$np99" 'BEGIN { if (n > 0) printf "%.2f", g / n; else print "n/a" }')
    ncpu=$(tr ' ' '\n' <<<"${cpu[nginx]:-}" | grep . | median || true); gcpu=$(tr ' ' '\n' <<<"${cpu[gateway]:-}" | grep . | median || true)
    cpu_ratio=$(awk -v g="${gcpu:-0}" -v n="${ncpu:-0}" 'BEGIN { if (n > 0 && g > 0) printf "%.2f", g / n; else print "n/a" }')
    ROWS+=("$(printf '| %s | %.0f | %.3f | %.3f | %.0f | %.3f | %.3f | %s | %s | %s / %s | %s | %s | %s |' \
        "$case$tag" "$nr" "$np50" "$np99" "$gr" "$gp50" "$gp99" "$tr_ratio" "$p99_ratio" "${errs[nginx]:-0}" "${errs[gateway]:-0}" \
        "${ncpu:-n/a}" "${gcpu:-n/a}" "$cpu_ratio")")
    if [[ -n "$CMP_HAPROXY_URL" ]]; then
        local hr hp99
        hr=$(tr ' ' '\n' <<<"${rps[haproxy]}" | grep . | median); hp99=$(tr ' ' '\n' <<<"${p99[haproxy]}" | grep . | median)
        HAPROXY_ROWS+=("$(awk -v c="$case$tag" -v n="$nr" -v h="$hr" -v g="$gr" -v hp="$hp99" -v gp="$gp99" \
            -v hs="$(xargs <<<"${rps[haproxy]}")" -v gs="$(xargs <<<"${rps[gateway]}")" \
            -v e="${errs[nginx]:-0} / ${errs[haproxy]:-0} / ${errs[gateway]:-0}" 'BEGIN {
            printf "| %s | %.0f | %.0f | %.0f | %s | %s | %.3f | %.3f | %s | %s | %s |", c, n, h, g,
                (h > 0 ? sprintf("%.2f", g / h) : "n/a"), (n > 0 ? sprintf("%.2f", g / n) : "n/a"), hp, gp, hs, gs, e }')")
    fi
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
    issuer_init
    GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$ISSUER_DIR/jwks.json\" }" write_gateway_config "$BENCH_TMP/gateway-$n.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" "$n"
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

# ---- App Check and TLS cases -----------------------------------------------------------------------------
# nginx has no App Check: in these rows the nginx columns are the plain proxy_pass baseline (the same request,
# token header included, which nginx ignores), so the ratio is the whole cost of verification (and, for the
# replay rows, of the store) over a bare proxy. Gateway threads = nginx workers = CASE_THREADS.

PROJECT_NUMBER="123456789012"   # must match write_gateway_config in lib.sh
PROJECT_ID="appcheck-bench"
ISSUER_DIR="$OUT_DIR/issuer"    # signing key, key set and cached session-token files (reused across runs)
SESSION_REUSE_MAX_AGE=1800      # reuse a cached 1 h session-token file while it is younger than 30 min
LIMITED_MAX_AGE=300             # limited-use tokens live 5 min (mint --limited-use)
PROBE_RATE=""                   # req/s of the gateway with a full RS256 verification on every request
TLS_PORT=""; GATEWAY_TLS_PORT=""; REDIS_PORT=""; REDIS_PID=""

# issuer_init: a local issuer (keygen) in ISSUER_DIR, made once and reused, so cached token files stay valid.
issuer_init() {
    [[ -n "${ISSUER_READY:-}" ]] && return
    mkdir -p "$ISSUER_DIR"
    if [[ ! -s "$ISSUER_DIR/key.pem" || ! -s "$ISSUER_DIR/jwks.json" ]]; then
        rm -rf "$ISSUER_DIR/tokens"
        "$GATEWAY_BIN" keygen --bits "${ISSUER_BITS:-2048}" --key "$ISSUER_DIR/key.pem" --jwks "$ISSUER_DIR/jwks.json" >&2 \
            || die "appcheck-gateway keygen failed"
    fi
    mkdir -p "$ISSUER_DIR/tokens"
    ISSUER_READY=1
}

# mint_tokens FILE COUNT [--limited-use]: COUNT distinct tokens, minted in parallel (one `mint` per core).
# Each shard has its own App ID (sub): session tokens of one `mint` differ by iat (now, now-1s, now-2s ...),
# so two shards started in the same second would otherwise print the same tokens. The shards' sub values
# differ from file to file too (a random tag), so no two files ever share a token.
mint_tokens() {
    local file="$1" count="$2" limited="${3:-}" shards i per start=$SECONDS tag pids=()
    shards="$(nproc)"; ((count < 2000)) && shards=1
    per=$(( (count + shards - 1) / shards ))
    # A session token's lifetime is ttl + its index in seconds; the gateway refuses lifetimes over 7 days.
    [[ -n "$limited" ]] || ((per <= 500000)) || die "mint_tokens: $per session tokens per shard is too many (7-day lifetime cap)"
    tag="$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
    log "minting $count ${limited:+limited-use }tokens into ${file#"$REPO_ROOT"/} ($shards shards)"
    for ((i = 0; i < shards; i++)); do
        "$GATEWAY_BIN" mint --key "$ISSUER_DIR/key.pem" --project-number "$PROJECT_NUMBER" --project-id "$PROJECT_ID" \
            --app-id "1:$PROJECT_NUMBER:ios:bench$tag$i" ${limited:+--limited-use} \
            --count $(( i < shards - 1 ? per : count - per * (shards - 1) )) >"$file.part$i" &
        pids+=("$!")
    done
    for i in "${!pids[@]}"; do wait "${pids[$i]}" || die "mint failed (shard $i)"; done
    cat "$file".part* >"$file.tmp" && rm -f "$file".part*
    local n; n="$(wc -l <"$file.tmp")"
    ((n == count)) || die "mint_tokens: wanted $count tokens, got $n"
    mv "$file.tmp" "$file"
    log "minted $count tokens in $((SECONDS - start)) s"
}

file_age() { echo $(( $(date +%s) - $(stat -c %Y "$1") )); }

# session_tokens COUNT [PREFIX]: prints the path of a file of >= COUNT session tokens (1 h) that has >= 30 min left:
# a cached one from ISSUER_DIR/tokens when there is one, else freshly minted (COUNT rounded up to 10,000
# above 10,000, so that later runs find it). Only ever used for one gateway process at a time, or for
# gateway processes restarted in between, so a file may be reused across runs and rounds.
session_tokens() {
    local want="$1" prefix="${2:-session}" f best="" best_n=0 n
    issuer_init
    for f in "$ISSUER_DIR"/tokens/"$prefix"-*.txt; do
        [[ -e "$f" ]] || continue
        n="${f##*/"$prefix"-}"; n="${n%.txt}"
        if (( $(file_age "$f") > SESSION_REUSE_MAX_AGE )); then rm -f "$f"; continue; fi
        if ((n >= want && (best_n == 0 || n < best_n))); then best="$f"; best_n="$n"; fi
    done
    if [[ -z "$best" ]]; then
        ((want > 10000)) && want=$(( (want + 9999) / 10000 * 10000 ))
        best="$ISSUER_DIR/tokens/$prefix-$want.txt"
        mint_tokens "$best" "$want" >&2
    else
        log "reusing ${best#"$REPO_ROOT"/} (minted $(( $(file_age "$best") / 60 )) min ago)"
    fi
    echo "$best"
}

# http_status URL [TOKEN]: the status of a GET (with X-Firebase-AppCheck when TOKEN is given); https without
# certificate verification (self-signed bench cert).
http_status() {
    python3 - "$@" <<'PY'
import ssl, sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2: req.add_header("X-Firebase-AppCheck", sys.argv[2])
ctx = ssl._create_unverified_context()
try:
    with urllib.request.urlopen(req, timeout=5, context=ctx) as r: print(r.status)
except urllib.error.HTTPError as e: print(e.code, e.read().decode(errors="replace")[:200])
except Exception as e: print("ERR", e)
PY
}

# gateway_up CONFIG: (re)starts the gateway with CONFIG, and makes sure it is the process that answers (a
# gateway that failed to bind exits, and a stray one on the same ports would answer /healthz in its place).
gateway_up() {
    [[ -n "${GATEWAY_PID:-}" ]] && stop_pid "$GATEWAY_PID"
    GATEWAY_PID=""
    [[ $BASH_SUBSHELL -eq 0 ]] || die "gateway_up must run in the main shell"
    start_gateway "$1" "$ADMIN_PORT"
    sleep 0.2
    kill -0 "$GATEWAY_PID" 2>/dev/null \
        || die "gateway exited right after start: $(tail -n 3 "$BENCH_TMP/gateway.stderr.log" | tr '\n' ' ')"
}

# nginx_up [TLS]: (re)starts the nginx peer with CASE_THREADS workers (with the TLS listener when TLS=tls).
nginx_up() {
    [[ -n "${NGINX_PROXY_PID:-}" ]] && stop_pid "$NGINX_PROXY_PID"
    NGINX_PROXY_PID=""
    if [[ "${1:-}" == tls ]]; then
        start_nginx_proxy "$NGINX_PORT" "$BACKEND_PORT" "$CASE_THREADS" "$TLS_PORT" "$BENCH_TMP/tls/cert.pem" "$BENCH_TMP/tls/key.pem"
    else
        start_nginx_proxy "$NGINX_PORT" "$BACKEND_PORT" "$CASE_THREADS"
    fi
}

# write_enforce_config FILE [REPLAY_STORE] [TOKEN_CACHE_SIZE] [TLS]: one enforce route on / (replay-protected
# with REPLAY_STORE), key set from the local issuer, project id checked; TLS=tls adds the TLS listener.
write_enforce_config() {
    local file="$1" store="${2:-}" cache="${3:-}" tls="${4:-}" route
    issuer_init
    route='  - { name: bench, prefix: /, upstream: api, enforcement: enforce }'
    local GATEWAY_APP_CHECK_YAML="  project_id: \"$PROJECT_ID\"
  jwks:
    url: \"file://$ISSUER_DIR/jwks.json\"${cache:+
  token_cache_size: $cache}"
    local GATEWAY_EXTRA_YAML="" GATEWAY_SERVER_YAML=""
    if [[ -n "$store" ]]; then
        route='  - { name: bench, prefix: /, upstream: api, enforcement: enforce, replay_protection: true }'
        GATEWAY_EXTRA_YAML="replay:
  store: $store
  sqlite_path: \"$BENCH_TMP/replay.sqlite\"
  redis_url: \"redis://127.0.0.1:${REDIS_PORT:-6379}/0\""
    fi
    if [[ "$tls" == tls ]]; then
        GATEWAY_SERVER_YAML="  tls:
    listen: [\"127.0.0.1:$GATEWAY_TLS_PORT\"]
    certificate: \"$BENCH_TMP/tls/cert.pem\"
    private_key: \"$BENCH_TMP/tls/key.pem\""
    fi
    write_gateway_config "$file" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" "$CASE_THREADS" "$route"
}

# check_enforce URL TOKEN [PROXY_NAME]: a request with TOKEN must pass (200), one without must get 401.
check_enforce() {
    local url="$1" tok="$2" ok no
    ok="$(http_status "$url" "$tok")"; no="$(http_status "$url")"
    [[ "$ok" == 200 && "$no" == 401* ]] \
        || die "enforce sanity check on $url failed: with a token '$ok', without '$no' (see $BENCH_TMP/gateway.*.log)"
}

# probe_rate: the gateway's req/s with the token cache off (a full RS256 verification per request), 2 s of wrk
# cycling 1,000 tokens; sizes the fresh-token and limited-use-token files.
probe_rate() {
    [[ -n "$PROBE_RATE" ]] && return
    [[ $BASH_SUBSHELL -eq 0 ]] || die "probe_rate must run in the main shell"
    local toks; toks="$(session_tokens 1000)"
    write_enforce_config "$BENCH_TMP/gateway-probe.yaml" "" 0
    gateway_up "$BENCH_TMP/gateway-probe.yaml"
    wrk -t1 -c"$WRK_CONNECTIONS" -d2s -s "$BENCH_DIR/tokens.lua" "http://127.0.0.1:$GATEWAY_PORT/" -- "$toks" cycle 1 \
        >"$RAW_DIR/probe.txt" 2>&1 || true
    PROBE_RATE="$(awk '/^Requests\/sec:/ { printf "%d", $2 }' "$RAW_DIR/probe.txt")"
    [[ -n "$PROBE_RATE" && "$PROBE_RATE" -gt 0 ]] || die "rate probe failed: $(head -c 400 "$RAW_DIR/probe.txt")"
    log "probe: $PROBE_RATE req/s with an RS256 verification per request (token cache off, threads $CASE_THREADS)"
}

# tokens_needed SECONDS: tokens for one gateway run of SECONDS: probe rate x SECONDS x 1.5 (the machine may
# be faster than during the probe) + 2,000; or --fresh-tokens. Call probe_rate first, in the main shell (this
# runs in $(...), where a gateway started by the probe would be lost).
tokens_needed() {
    # --fresh-tokens N sizes a run of DURATION; a shorter one (the 1 s warm-up) gets its share and 1,000 more (a
    # warm-up file as large as the measured one doubled the minting, and on a slow machine the measured tokens
    # expired meanwhile).
    if [[ -n "$FRESH_TOKENS" ]]; then
        (( $1 >= DURATION )) && echo "$FRESH_TOKENS" || echo $(( FRESH_TOKENS * $1 / DURATION + 1000 ))
        return
    fi
    [[ -n "$PROBE_RATE" ]] || die "tokens_needed: probe_rate has not run"
    echo $(( PROBE_RATE * $1 * 3 / 2 + 2000 ))
}

# Case: enforce route, 1,000 session tokens cycled (the token cache hit path). Target: gateway >= 0.8x nginx.
case_enforce_cycled_tokens() {
    local toks; toks="$(session_tokens 1000)"
    nginx_up
    write_enforce_config "$BENCH_TMP/gateway-enforce.yaml"
    gateway_up "$BENCH_TMP/gateway-enforce.yaml"
    check_enforce "http://127.0.0.1:$GATEWAY_PORT/" "$(head -n 1 "$toks")"
    reset_case_opts
    compare_case "enforce, 1,000 cycled session tokens, threads $CASE_THREADS" \
        "http://127.0.0.1:$NGINX_PORT/" "http://127.0.0.1:$GATEWAY_PORT/" -s "$BENCH_DIR/tokens.lua" -- "$toks" cycle 1
}

# Case: a fresh token per request (every request pays a full RS256 verification; token cache all misses).
# One file of distinct session tokens (tokens.lua unique) sized for one gateway run; the gateway is restarted
# before each of its rounds (empty token cache) and warmed up with a separate small file, so every round sends
# only tokens that process has never seen. nginx cycles the same file (it ignores the header).
FRESH_MAIN=""; FRESH_WARM=""; FRESH_CONFIG=""
fresh_prep() {
    gateway_up "$FRESH_CONFIG"
    wrk -t1 -c"$WRK_CONNECTIONS" -d1s -s "$BENCH_DIR/tokens.lua" "http://127.0.0.1:$GATEWAY_PORT/" -- "$FRESH_WARM" unique-wrap 1 \
        >/dev/null 2>&1 || true
}
case_fresh_token_per_request() {
    local need warm_need
    [[ -n "$FRESH_TOKENS" ]] || probe_rate
    need="$(tokens_needed "$DURATION")"; warm_need="$(tokens_needed 1)"
    # Two distinct files: the warm-up one must not share tokens with the measured one.
    FRESH_MAIN="$(session_tokens "$need")"
    FRESH_WARM="$(session_tokens "$warm_need" warm)"
    nginx_up
    FRESH_CONFIG="$BENCH_TMP/gateway-fresh.yaml"
    write_enforce_config "$FRESH_CONFIG"
    gateway_up "$FRESH_CONFIG"
    check_enforce "http://127.0.0.1:$GATEWAY_PORT/" "$(head -n 1 "$FRESH_WARM")"
    reset_case_opts
    CMP_NGINX_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$FRESH_MAIN" cycle 1)
    CMP_GATEWAY_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$FRESH_MAIN" unique 1)
    CMP_GATEWAY_PREP=fresh_prep
    compare_case "fresh session token per request (RS256 each time), threads $CASE_THREADS" \
        "http://127.0.0.1:$NGINX_PORT/" "http://127.0.0.1:$GATEWAY_PORT/"
    reset_case_opts
}

# Case: a `dpop: required` route (SPEC §4.4; memory replay store, dpop_max_age 1h), one session token bound to a
# P-256 key (cnf.jkt; a token-cache hit) and a fresh DPoP proof per request: each request pays one ECDSA P-256
# verification and one replay insert. A store refuses proofs issued before it came up, so the proofs are made after
# the gateway started, by one `appcheck-gateway-bench dpop` run (one token, every proof its own random jti), and
# split into a warm-up file and one file per round. The gateway is not restarted between rounds and each round
# sends its own proofs once (tokens.lua unique, header DPoP): no proof is ever replayed. A round that runs out stops
# early and is noted (raise --dpop-proofs, default 15,000 x duration per round). nginx cycles the same file.
DPOP_DIR=""
dpop_prep() {
    cp "$DPOP_DIR/round-$1.proofs" "$DPOP_DIR/current.proofs"
    if [[ "$1" == 1 ]]; then
        wrk -t1 -c"$WRK_CONNECTIONS" -d1s -s "$BENCH_DIR/tokens.lua" -H "X-Firebase-AppCheck: $(cat "$DPOP_DIR/token")" \
            "http://127.0.0.1:$GATEWAY_PORT/" -- "$DPOP_DIR/warm.proofs" unique 1 DPoP >/dev/null 2>&1 || true
    fi
}
case_dpop_required() {
    local per="${DPOP_PROOFS:-$((15000 * DURATION))}" warm=20000 r ok no proof bench_exe
    local route='  - { name: bench, prefix: /, upstream: api, enforcement: enforce, dpop: required, dpop_max_age: 1h }'
    issuer_init
    bench_exe="$(dirname "$GATEWAY_BIN")/appcheck-gateway-bench"
    [[ -x "$bench_exe" ]] || die "the dpop case needs $bench_exe (make release builds it)"
    DPOP_DIR="$BENCH_TMP/dpop"; mkdir -p "$DPOP_DIR"
    GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$ISSUER_DIR/jwks.json\" }" GATEWAY_SERVER_YAML="" \
        GATEWAY_EXTRA_YAML=$'replay:\n  store: memory' \
        write_gateway_config "$DPOP_DIR/gateway.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" "$CASE_THREADS" "$route"
    nginx_up
    gateway_up "$DPOP_DIR/gateway.yaml"
    sleep 2   # proofs carry whole-second iats: made strictly after the start
    log "making $((warm + ROUNDS * per)) DPoP proofs"
    "$bench_exe" dpop --key "$ISSUER_DIR/key.pem" --project-number "$PROJECT_NUMBER" --app-id "1:$PROJECT_NUMBER:ios:dpopbench" \
        --htu "http://127.0.0.1:$GATEWAY_PORT/" --count $((warm + ROUNDS * per)) >"$DPOP_DIR/all.txt" \
        || die "appcheck-gateway-bench dpop failed"
    head -n 1 "$DPOP_DIR/all.txt" >"$DPOP_DIR/token"
    # (sed, not tail | head: head's early exit would end the script by SIGPIPE under pipefail)
    sed -n "2,$((1 + warm))p" "$DPOP_DIR/all.txt" >"$DPOP_DIR/warm.proofs"
    for ((r = 1; r <= ROUNDS; r++)); do
        sed -n "$((2 + warm + (r - 1) * per)),$((1 + warm + r * per))p" "$DPOP_DIR/all.txt" >"$DPOP_DIR/round-$r.proofs"
    done
    rm -f "$DPOP_DIR/all.txt"
    # Sanity: the token with a proof passes, without one it is refused (dpop_missing). Uses the warm-up's last proof.
    proof="$(tail -n 1 "$DPOP_DIR/warm.proofs")"
    ok="$(curl -s -o /dev/null -w '%{http_code}' -H "X-Firebase-AppCheck: $(cat "$DPOP_DIR/token")" -H "DPoP: $proof" \
        "http://127.0.0.1:$GATEWAY_PORT/")"
    no="$(curl -s -o /dev/null -w '%{http_code}' -H "X-Firebase-AppCheck: $(cat "$DPOP_DIR/token")" "http://127.0.0.1:$GATEWAY_PORT/")"
    [[ "$ok" == 200 && "$no" == 401 ]] || die "dpop sanity check failed: with a proof $ok, without $no (see $BENCH_TMP/gateway.*.log)"
    sed -i '$d' "$DPOP_DIR/warm.proofs"
    reset_case_opts
    CMP_NGINX_ARGS=(-H "X-Firebase-AppCheck: $(cat "$DPOP_DIR/token")" -s "$BENCH_DIR/tokens.lua" -- "$DPOP_DIR/round-1.proofs" cycle 1 DPoP)
    CMP_GATEWAY_ARGS=(-H "X-Firebase-AppCheck: $(cat "$DPOP_DIR/token")" -s "$BENCH_DIR/tokens.lua" -- "$DPOP_DIR/current.proofs" unique 1 DPoP)
    CMP_GATEWAY_PREP=dpop_prep
    compare_case "dpop: required, one bound token, fresh proof per request, threads $CASE_THREADS" \
        "http://127.0.0.1:$NGINX_PORT/" "http://127.0.0.1:$GATEWAY_PORT/"
    reset_case_opts
}

# Case: replay_protection routes with each store (memory | sqlite | redis on loopback), a fresh limited-use
# token per request. Limited-use tokens live 5 min, so they are minted per store right before its rounds (and
# again if a round would outlive them). Before each gateway round the store is emptied (memory: restart;
# sqlite: file removed; redis: FLUSHALL) and the gateway restarted, so the same file is fresh every round.
REPLAY_STORE=""; REPLAY_MAIN=""; REPLAY_WARM=""; REPLAY_CONFIG=""; REPLAY_NEED=0; REPLAY_WARM_NEED=0
replay_mint() {
    REPLAY_MAIN="$BENCH_TMP/limited-main.txt"; REPLAY_WARM="$BENCH_TMP/limited-warm.txt"
    # The small warm-up file last: it is used first, and the measured file then ages only by its minting (a slow,
    # busy machine otherwise let the warm-up tokens expire while the large file was minted).
    local start=$SECONDS
    mint_tokens "$REPLAY_MAIN" "$REPLAY_NEED" --limited-use
    mint_tokens "$REPLAY_WARM" "$REPLAY_WARM_NEED" --limited-use
    # The first tokens of the measured file are as old as the whole minting: past the 5-minute lifetime they are
    # refused as expired (the gateway's and HAProxy's rows then count 401s; say so rather than measure that).
    if (( SECONDS - start + DURATION + 20 > LIMITED_MAX_AGE )); then
        NOTES+=("limited-use tokens: minting took $((SECONDS - start)) s, so the first tokens of the measured file expire during the run (they live ${LIMITED_MAX_AGE} s): the rows that use them count expired refusals; lower --fresh-tokens or run on a quieter machine")
        log "WARNING: minting took $((SECONDS - start)) s: the oldest limited-use tokens will expire during the run"
    fi
}
replay_prep() {
    # A round needs its tokens valid for warm-up + DURATION (+ the gateway's 10 s clock skew, not counted).
    if (( $(file_age "$REPLAY_WARM") + DURATION + 20 > LIMITED_MAX_AGE )); then
        log "limited-use tokens too old for another round: minting new ones"
        replay_mint
        CMP_NGINX_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$REPLAY_MAIN" cycle 1)
    fi
    if [[ "$REPLAY_STORE" == memory || "$REPLAY_STORE" == redis ]]; then
        # The memory store, and a Redis store that finds its state gone (a flush), refuse limited-use tokens issued
        # before their start + clock_skew (what was seen may be lost; SPEC §5), so neither is restarted or flushed
        # between rounds: each round gets tokens of its own, minted now (after that window), never seen before.
        replay_mint
        CMP_NGINX_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$REPLAY_MAIN" cycle 1)
        CMP_GATEWAY_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$REPLAY_MAIN" unique 1)
    else
        [[ -n "${GATEWAY_PID:-}" ]] && { stop_pid "$GATEWAY_PID"; GATEWAY_PID=""; }
        case "$REPLAY_STORE" in
            sqlite) rm -f "$BENCH_TMP/replay.sqlite" "$BENCH_TMP/replay.sqlite-wal" "$BENCH_TMP/replay.sqlite-shm" "$BENCH_TMP/replay.sqlite-journal" ;;
            redis) redis-cli -p "$REDIS_PORT" FLUSHALL >/dev/null || die "redis FLUSHALL failed" ;;
        esac
        gateway_up "$REPLAY_CONFIG"
    fi
    wrk -t1 -c"$WRK_CONNECTIONS" -d1s -s "$BENCH_DIR/tokens.lua" "http://127.0.0.1:$GATEWAY_PORT/" -- "$REPLAY_WARM" unique 1 \
        >/dev/null 2>&1 || true
}
start_redis() {
    [[ -n "$REDIS_PID" ]] && return
    REDIS_PORT="$(free_ports 1)"
    mkdir -p "$BENCH_TMP/redis"
    redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no --dir "$BENCH_TMP/redis" \
        >"$BENCH_TMP/redis/stdout.log" 2>&1 &
    REDIS_PID=$!
    BENCH_PIDS+=("$REDIS_PID")
    for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" PING 2>/dev/null | grep -q PONG && return; sleep 0.1; done
    die "redis-server did not start on $REDIS_PORT: $(tail -n 5 "$BENCH_TMP/redis/stdout.log")"
}
case_replay_stores() {
    local store probe ok again
    [[ -n "$FRESH_TOKENS" ]] || probe_rate
    REPLAY_NEED="$(tokens_needed "$DURATION")"; REPLAY_WARM_NEED="$(tokens_needed 1)"
    nginx_up
    for store in memory sqlite redis; do
        REPLAY_STORE="$store"
        [[ "$store" == redis ]] && start_redis
        REPLAY_CONFIG="$BENCH_TMP/gateway-replay-$store.yaml"
        write_enforce_config "$REPLAY_CONFIG" "$store"
        gateway_up "$REPLAY_CONFIG"
        if [[ "$store" != sqlite ]]; then
            # Tokens issued before the store's start + clock_skew (10 s) are refused; `iat` has whole seconds.
            log "replay ($store): waiting 11 s after the gateway's start before minting limited-use tokens"
            sleep 11
        fi
        # Sanity: a limited-use token passes once, then is refused as reused; a session token is refused.
        probe="$BENCH_TMP/limited-probe.txt"; mint_tokens "$probe" 1 --limited-use 2>/dev/null
        ok="$(http_status "http://127.0.0.1:$GATEWAY_PORT/" "$(cat "$probe")")"
        again="$(http_status "http://127.0.0.1:$GATEWAY_PORT/" "$(cat "$probe")")"
        [[ "$ok" == 200 && "$again" == 401*reuse* ]] \
            || die "replay sanity check ($store) failed: first use '$ok', second use '$again'"
        replay_mint
        reset_case_opts
        CMP_NGINX_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$REPLAY_MAIN" cycle 1)
        CMP_GATEWAY_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$REPLAY_MAIN" unique 1)
        CMP_GATEWAY_PREP=replay_prep
        compare_case "replay ($store), fresh limited-use token per request, threads $CASE_THREADS" \
            "http://127.0.0.1:$NGINX_PORT/" "http://127.0.0.1:$GATEWAY_PORT/"
        reset_case_opts
    done
    # Stop the gateway first: one that loses its store logs "replay store connection lost".
    [[ -n "${GATEWAY_PID:-}" ]] && { stop_pid "$GATEWAY_PID"; GATEWAY_PID=""; }
    if [[ -n "$REDIS_PID" ]]; then stop_pid "$REDIS_PID"; REDIS_PID=""; fi
}

# Case: the verifying peer, HAProxy 2.6 with jwt_verify (issue 24; start_haproxy in lib.sh): one thread,
# `http-reuse always` to the same backend, 401 unless alg RS256, jwt_verify, the Firebase iss and an exp not
# past. HAProxy takes one key per rule, so every token of this case is signed by one RSA-3072 key of its own
# issuer (out/issuer3072/); the gateway reads that key's set. Before measuring, both must accept a good token
# and refuse a changed payload, another key, alg none, an expired token and another issuer (verifier_sanity).
# Two rows, each nginx / HAProxy / gateway alternated per round:
#   (a) 1,000 cycled session tokens: the gateway's verified-token cache hits; HAProxy has none and verifies each.
#   (b) a fresh limited-use token per request on a replay-protected route (memory store): the gateway verifies
#       and consumes every token (the replay case's per-round minting, replay_prep); HAProxy cannot consume
#       tokens, so it cycles the same file, which for it (no cache) is a full verification per request too.
# nginx verifies nothing; it is the bare-proxy baseline of the same requests.
HAPROXY_PORT=""
case_haproxy_peer() {
    local saved_dir="$ISSUER_DIR" toks good
    ISSUER_DIR="$OUT_DIR/issuer3072"; ISSUER_BITS=3072; ISSUER_READY=""
    issuer_init
    openssl pkey -in "$ISSUER_DIR/key.pem" -pubout -out "$BENCH_TMP/issuer3072-pub.pem" 2>/dev/null \
        || die "openssl could not write the RSA-3072 public key"
    HAPROXY_PORT="$(free_ports 1)"
    [[ -n "${HAPROXY_PID:-}" ]] && stop_pid "$HAPROXY_PID"
    start_haproxy "$HAPROXY_PORT" "$BACKEND_PORT" "$BENCH_TMP/issuer3072-pub.pem" "$PROJECT_NUMBER"
    log "$(haproxy -v | head -n 1)"
    toks="$(session_tokens 1000)"
    good="$(head -n 1 "$toks")"
    nginx_up
    write_enforce_config "$BENCH_TMP/gateway-haproxy-cycled.yaml"
    gateway_up "$BENCH_TMP/gateway-haproxy-cycled.yaml"
    verifier_sanity HAProxy "http://127.0.0.1:$HAPROXY_PORT/" "$good" "$ISSUER_DIR/key.pem"
    verifier_sanity gateway "http://127.0.0.1:$GATEWAY_PORT/" "$good" "$ISSUER_DIR/key.pem"

    reset_case_opts
    CMP_HAPROXY_URL="http://127.0.0.1:$HAPROXY_PORT/"
    compare_case "RSA-3072: 1,000 cycled session tokens, threads $CASE_THREADS" \
        "http://127.0.0.1:$NGINX_PORT/" "http://127.0.0.1:$GATEWAY_PORT/" -s "$BENCH_DIR/tokens.lua" -- "$toks" cycle 1

    [[ -n "$FRESH_TOKENS" ]] || probe_rate
    REPLAY_NEED="$(tokens_needed "$DURATION")"; REPLAY_WARM_NEED="$(tokens_needed 1)"
    REPLAY_STORE=memory
    REPLAY_CONFIG="$BENCH_TMP/gateway-haproxy-fresh.yaml"
    write_enforce_config "$REPLAY_CONFIG" memory
    gateway_up "$REPLAY_CONFIG"
    log "haproxy (fresh): waiting 11 s after the gateway's start before minting limited-use tokens"
    sleep 11
    replay_mint
    reset_case_opts
    CMP_HAPROXY_URL="http://127.0.0.1:$HAPROXY_PORT/"
    CMP_NGINX_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$REPLAY_MAIN" cycle 1)
    CMP_GATEWAY_ARGS=(-s "$BENCH_DIR/tokens.lua" -- "$REPLAY_MAIN" unique 1)
    CMP_GATEWAY_PREP=replay_prep
    compare_case "RSA-3072: fresh limited-use token per request (gateway consumes it; HAProxy cannot), threads $CASE_THREADS" \
        "http://127.0.0.1:$NGINX_PORT/" "http://127.0.0.1:$GATEWAY_PORT/"
    reset_case_opts
    stop_pid "$HAPROXY_PID"; HAPROXY_PID=""
    [[ -n "${GATEWAY_PID:-}" ]] && { stop_pid "$GATEWAY_PID"; GATEWAY_PID=""; }
    ISSUER_DIR="$saved_dir"; ISSUER_BITS=2048; ISSUER_READY=""
}

# TLS: one self-signed RSA-2048 / SHA-256 certificate for 127.0.0.1 and localhost, shared by nginx and the
# gateway; nginx listens `ssl http2` (TLS 1.2/1.3) next to its plain port, the gateway on its tls listener.
tls_up() {
    if [[ ! -s "$BENCH_TMP/tls/cert.pem" ]]; then
        mkdir -p "$BENCH_TMP/tls"
        openssl req -x509 -newkey rsa:2048 -sha256 -nodes -days 2 -subj "/CN=localhost" \
            -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "extendedKeyUsage=serverAuth" \
            -keyout "$BENCH_TMP/tls/key.pem" -out "$BENCH_TMP/tls/cert.pem" >/dev/null 2>&1 \
            || die "openssl could not make the benchmark certificate"
        read -r TLS_PORT GATEWAY_TLS_PORT <<<"$(free_ports 2)"
    fi
    TLS_TOKEN="$(head -n 1 "$(session_tokens 1000)")"
    nginx_up tls
    write_enforce_config "$BENCH_TMP/gateway-tls.yaml" "" "" tls
    gateway_up "$BENCH_TMP/gateway-tls.yaml"
    check_enforce "https://127.0.0.1:$GATEWAY_TLS_PORT/" "$TLS_TOKEN"
    [[ "$(http_status "https://127.0.0.1:$TLS_PORT/")" == 200 ]] || die "nginx TLS listener on $TLS_PORT does not answer 200"
}

# Case: HTTP/2 over TLS, h2load -c64 -m10 (ALPN h2) against both TLS listeners. The gateway route enforces
# App Check; h2load cannot vary a header per request, so every request carries the same session token (a
# token-cache hit after the first). Target: gateway >= 0.8x nginx.
case_h2load_tls() {
    tls_up
    reset_case_opts
    CMP_TOOL=h2load
    compare_case "h2load -c64 -m10 over TLS (h2), one session token, threads $CASE_THREADS" \
        "https://127.0.0.1:$TLS_PORT/" "https://127.0.0.1:$GATEWAY_TLS_PORT/" \
        -c64 -m10 -H "x-firebase-appcheck: $TLS_TOKEN"
    reset_case_opts
}

# tls_resumes PORT: "resumed" when a second openssl s_client connection resumes the first one's session
# (ticket or cache), else "full".
tls_resumes() {
    local sess="$BENCH_TMP/tls/sess-$1"
    rm -f "$sess"
    (sleep 0.5) | openssl s_client -connect "127.0.0.1:$1" -sess_out "$sess" >/dev/null 2>&1 || true
    if [[ -s "$sess" ]] && (sleep 0.5) | openssl s_client -connect "127.0.0.1:$1" -sess_in "$sess" 2>/dev/null | grep -q '^Reused'; then
        echo resumed
    else
        echo full
    fi
}

# Case: TLS handshakes per second. wrk over https with `Connection: close`: the server closes after each
# response and wrk reconnects, so every request is a new TCP connection with a TLS handshake; requests/s =
# handshakes/s. wrk DOES offer the previous session for resumption (checked with nginx's $ssl_session_reused:
# 3449 of 3457 resumed with nginx's defaults). The gateway issues session tickets and has no setting to turn
# them off, so nginx keeps its default (tickets on) too: both rows count mostly TLS 1.3 PSK resumptions, not
# full RSA handshakes. The case checks with openssl s_client what each server allows and notes any difference. The latencies are those of the request on the
# fresh connection (wrk starts the clock after the handshake). Same enforce route and token as the h2 case.
case_tls_handshakes() {
    tls_up
    local n_res g_res
    n_res="$(tls_resumes "$TLS_PORT")"; g_res="$(tls_resumes "$GATEWAY_TLS_PORT")"
    log "TLS session resumption: nginx $n_res, gateway $g_res"
    [[ "$n_res" == "$g_res" ]] \
        || NOTES+=("TLS handshakes: session resumption differs (nginx $n_res, gateway $g_res): the 'resumed' server's figure counts abbreviated handshakes (wrk resumes when the server allows it); the ratio is not like for like")
    reset_case_opts
    compare_case "TLS handshakes/s (new connection per request, HTTP/1.1, resumption: nginx $n_res / gateway $g_res), threads $CASE_THREADS" \
        "https://127.0.0.1:$TLS_PORT/" "https://127.0.0.1:$GATEWAY_TLS_PORT/" \
        -H "Connection: close" -H "X-Firebase-AppCheck: $TLS_TOKEN"
}

# Case: resident memory with IDLE_CONNECTIONS idle keep-alive connections (gateway only, threads 1).
RSS_SUMMARY=""
case_idle_rss() {
    [[ -n "${NGINX_PROXY_PID:-}" ]] && { stop_pid "$NGINX_PROXY_PID"; NGINX_PROXY_PID=""; }
    [[ -n "${GATEWAY_PID:-}" ]] && { stop_pid "$GATEWAY_PID"; GATEWAY_PID=""; }
    issuer_init
    GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$ISSUER_DIR/jwks.json\" }" write_gateway_config "$BENCH_TMP/gateway-rss.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" 1
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
if want_case http1; then
    for n in $THREADS_LIST; do
        case_off_route "$n"
    done
fi
want_case enforce && case_enforce_cycled_tokens
want_case fresh && case_fresh_token_per_request
want_case replay && case_replay_stores
want_case dpop && case_dpop_required
want_case haproxy && case_haproxy_peer
want_case h2 && case_h2load_tls
want_case handshakes && case_tls_handshakes
want_case rss && case_idle_rss

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
    echo "CPU: microseconds of CPU (user + system, from /proc) per request of each proxy's serving processes, median of the"
    echo "rounds; a CPU ratio < 1 means the gateway spends less of the machine per request."
    echo
    echo "| case | nginx req/s | nginx p50 | nginx p99 | gateway req/s | gateway p50 | gateway p99 | throughput ratio | p99 ratio | errors nginx / gateway | nginx CPU µs/req | gateway CPU µs/req | CPU ratio |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${ROWS[@]}"
    if ((${#HAPROXY_ROWS[@]})); then
        echo
        echo "Verifying peer: $(haproxy -v 2>/dev/null | head -n 1 | cut -d' ' -f1-3), nbthread 1, jwt_verify RS256 with one RSA-3072 key (Benchmarks/lib.sh start_haproxy);"
        echo "the same requests, alternated nginx / HAProxy / gateway per round; median req/s; ratios gateway / HAProxy and gateway / nginx."
        echo
        echo "| case | nginx req/s | HAProxy req/s | gateway req/s | gateway / HAProxy | gateway / nginx | HAProxy p99 | gateway p99 | HAProxy rounds | gateway rounds | errors n / h / g |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"
        printf '%s\n' "${HAPROXY_ROWS[@]}"
    fi
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
