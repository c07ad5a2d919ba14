#!/usr/bin/env bash
# Issue 15's repros, one by one, measured against one gateway binary: run it on the binary from before the fixes
# and on the current one, and the two tables are the closing note's "before and after". Each defect gets a fresh
# gateway (1 or 2 threads) in front of the same counting backend (Benchmarks/defects_attacks.py backend: reads
# every request body before it answers, /big = 10 MB, counts the connections it accepts and records request heads),
# runs its repro bounded in time (≤ 70 s each, 4–5 minutes in all), and prints one markdown row. Run by hand
# (it is not part of make test):
#
#   GATEWAY_BIN=/path/to/appcheck-gateway Benchmarks/defects.sh [--defects 1,2,3,4,5,6,7,8,9] [--out FILE]
#   Benchmarks/defects.sh --defects 8,9 --quick       # smaller counts and shorter runs, for trying the script
#
# The configuration uses only keys both sides accept (no body_timeout, no max_connects_per_second: defaults) and
# is checked with the binary's own check-config first: idle_timeout 30s (the issue's), header_timeout and
# body_timeout at their defaults (10 s, 60 s where they exist), max_connections 100 for #1 (10,000 otherwise).
#
# Columns:
#   repro              what was run (the issue's repro, bounded)
#   RSS before/peak/after (MiB)  the gateway's VmRSS just before the repro, the highest sample (every 100 ms)
#                      during repro and settle, and after the settle time the row names (10 s for #1, 30 s for
#                      #4, 1–5 s otherwise)
#   CLOSE-WAIT         the gateway's sockets (client and upstream side) in CLOSE-WAIT after the settle:
#                      its fds' socket inodes looked up in /proc/PID/net/tcp{,6}
#   open               gateway_connections{state="open"} from the admin /metrics after the settle ("-" if the
#                      binary has no such metric, "n/a" if the admin port did not answer)
#   upstream connects  connections the backend accepted from the start of the repro to the end of the settle
#   CPU s              the gateway's utime+stime (/proc/PID/stat, CLK_TCK) over the repro, settle excluded
#   observed           the repro's own figures (answers and when, connections held, latency of a normal client)
#   verdict            against the issue's "Expected": PASS, or what is still wrong:
#     #1 PASS: no CLOSE-WAIT, nothing counted open, no upstream connection left at the backend, a new client gets
#        200 (else LEAK)
#     #2 PASS: every HTTP/1.1 client gets 408 and is closed, every h2c stream gets 408, by 65 s; the backend holds
#        no upstream connection by 66 s (else FAIL)
#     #3 PASS: upstream connects ≤ max(10, 1% of the reset pairs) (else AMPLIFIED) and every normal request is 200
#        (else DEGRADED)
#     #4 PASS: RSS growth < 200 KiB per stream, buffered bytes per connection ≤ 1.5 MiB (the gateway's
#        gateway_h2_buffered_response_bytes where it exists, else RSS), and 30 s after the clients left RSS within
#        max(16 MiB, 25% of the growth) of before (else FAIL naming the criteria missed)
#     #5 PASS: ≤ 0.5 CPU s over the 5 s window with 300 connections held, a new client served after the release
#     #6 PASS: the upstream received no injected request (else SPLIT)
#     #7 PASS: the token is refused after the restart (else REPLAYED)
#     #8 PASS: no header name with `_` reached the upstream (else FORWARDED)
#     #9 PASS: every silent connection closed by 11.5 s, i.e. at header_timeout (else HELD)
# #6 and #7 are verifier and store rules: their rows say what the upstream and the client saw (no resource
# figures for #7: the gateway is restarted in the middle).
#
# Memory mode (issue 25, "memory returns"): does RSS come back after each attack kind?
#
#   GATEWAY_BIN=... Benchmarks/defects.sh --memory [--attacks a,b,...] [--seconds S] [--out FILE]
#
# Kinds (default: all, from `soak_attacks.py --list`): the soak's attacks (rapid-reset zero-window close-mid-body
# slow-body silent underscore hostile-tokens smuggling issuer-flood challenge-flood issuer-slow-body hostile-cbor
# custom-replay) and four bursts of the issue: big-uploads (64 clients × 8 MB POSTs, buffered bodies), h2-buffers
# (2,000 zero-window streams of /big, HTTP/2 response buffers), issuer-bodies (480 exchanges from 16 addresses each
# holding 64 KiB less a byte: 30 MiB of issuer bodies; the soak's issuer-slow-body, from one address, is stopped by
# the per-address rate limit at ~40) and conn-storm (5,000 connections held 3 s, closed, again). Setup as Benchmarks/soak.sh's (lib.sh's soak_backend_up once, soak_gateway_up per kind): nginx backend,
# the issuer with one App Attest app, its debug secret and custom tokens, 2 threads. Per kind: a FRESH gateway;
# warm-up (wrk 2 s on the `off` route and 2 s on the `enforce` route with a token, 5 debug-secret exchanges and
# one custom-token exchange, then 3 s idle); RSS before; the attack alone for S seconds (default 25, bounded by
# `timeout S+40`); then RSS once a second for up to 60 s, stopping early once 5 samples in a row are within 20% of
# before. One row per kind:
#   RSS before         VmRSS just before the attack (MiB)
#   peak               VmHWM at the end of sampling (the process's highest RSS; the warm-up stays below before's)
#   at end of attack   VmRSS when the attack's process exited (its sockets closed)
#   after ≤60 s        VmRSS at the last sample
#   s to within 20%    seconds after the attack ended from which RSS stayed within 20% of before ("never" if it
#                      did not by 60 s)
#   buffers after      the sum of gateway_buffer_bytes{kind=...} from the admin /metrics at the last sample
#   verdict            PASS when RSS was within 20% of before within 60 s, else FAIL with the figures
# Under the table: what each attack did (its connections and requests), the peak of gateway_buffer_bytes and of
# open connections during it, and the gateway's connections to the backend at the last sample (idle in its upstream
# pool until idle_timeout, 120 s here: they hold io buffers); with --out FILE the per-second samples go to FILE.samples. MALLOC_* variables in
# the environment reach the gateway (e.g. MALLOC_ARENA_MAX=2 to diagnose) and are named in the header line.
# About 1–1.5 minutes per kind.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DEFECTS=1,2,3,4,5,6,7,8,9
OUT=""
QUICK=()
MEMORY=0
MEM_ATTACKS=""
MEM_SECONDS=25
while (($#)); do
    case "$1" in
        --defects) DEFECTS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --quick) QUICK=(--quick); shift ;;
        --memory) MEMORY=1; shift ;;
        --attacks) MEM_ATTACKS="$2"; shift 2 ;;
        --seconds) MEM_SECONDS="$2"; shift 2 ;;
        *) echo "usage: GATEWAY_BIN=... $0 [--defects 1,2,3,4,5,6,7,8,9] [--out FILE] [--quick]" >&2
           echo "       GATEWAY_BIN=... $0 --memory [--attacks a,b,...] [--seconds S] [--out FILE]" >&2; exit 2 ;;
    esac
done
[[ -x "$GATEWAY_BIN" ]] || die "no gateway binary at $GATEWAY_BIN (set GATEWAY_BIN)"
command -v prlimit >/dev/null || die "prlimit not found (util-linux)"
command -v openssl >/dev/null || die "openssl not found"

emit() {
    echo "$1"
    [[ -z "$OUT" ]] || echo "$1" >>"$OUT"
}

identity() {
    local version
    version="$("$GATEWAY_BIN" --version 2>/dev/null | head -n 1)" || version="no --version"
    echo "gateway: \`$GATEWAY_BIN\` ($version, sha256 $(sha256sum "$GATEWAY_BIN" | cut -c1-12)), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
}

# ---- --memory ------------------------------------------------------------------------------------------------
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
# gauges: "BUFFERS OPEN" from the admin /metrics (the sum of gateway_buffer_bytes, open client connections); "n/a n/a".
gauges() {
    curl -s -m 2 "http://127.0.0.1:$ADMIN_PORT/metrics" 2>/dev/null | awk '
        /^gateway_buffer_bytes\{/ { b += $2; seen = 1 }
        /^gateway_connections\{state="open"\}/ { o = $2 }
        END { if (seen) printf "%d %s\n", b, (o == "" ? "-" : o); else print "n/a n/a" }'
}

memory_warm_up() {  # valid traffic on both routes and a few exchanges; warns when any failed
    local out bad=() code token i base="http://127.0.0.1:$GW_PORT/appcheck/v1/projects/123456789012/apps/$SOAK_APP"
    out="$(wrk -t1 -c4 -d2s --timeout 5s "http://127.0.0.1:$GW_PORT/" 2>&1 || true)"
    grep -qE 'Non-2xx|Socket errors' <<<"$out" && bad+=("off route: $(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr '\n' ' ')")
    printf 'wrk.headers["X-Firebase-AppCheck"] = "%s"\n' "$TOKEN" >"$BENCH_TMP/token.lua"
    out="$(wrk -t1 -c4 -d2s --timeout 5s -s "$BENCH_TMP/token.lua" "http://127.0.0.1:$GW_PORT/api/orders" 2>&1 || true)"
    grep -qE 'Non-2xx|Socket errors' <<<"$out" && bad+=("enforce route: $(grep -E 'Non-2xx|Socket errors' <<<"$out" | tr '\n' ' ')")
    for i in 1 2 3 4 5; do
        code="$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
            --data "{\"debug_token\":\"$SOAK_SECRET\"}" "$base:exchangeDebugToken" || true)"
        [[ "$code" == 200 ]] || bad+=("debug exchange $i: $code")
    done
    token="$(eval "$SOAK_CUSTOM_TOKEN_CMD")"
    code="$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
        --data "{\"custom_token\":\"$token\"}" "$base:exchangeCustomToken" || true)"
    [[ "$code" == 200 ]] || bad+=("custom-token exchange: $code")
    ((${#bad[@]} == 0)) || log "warm-up: ${bad[*]}"
}

# memory_row KIND: a fresh gateway, warm-up, RSS before, the attack, RSS once a second for up to 60 s; one row.
memory_row() {
    local a="$1" apid before peak_buf=0 peak_open=0 b o end rss within="" streak=0 t0 t after hwm buf verdict what pool
    local samples="$BENCH_TMP/mem-$a.samples"
    read -r GW_PORT ADMIN_PORT < <(free_ports 2)
    soak_gateway_up "$BENCH_TMP/gateway-mem-$a.yaml" "$GW_PORT" "$ADMIN_PORT" "$BACKEND_PORT"
    wait_http "http://127.0.0.1:$ADMIN_PORT/readyz" 30 "$GATEWAY_PID" || die "gateway not ready ($a)"
    memory_warm_up
    sleep 3
    before=$(rss_kib "$GATEWAY_PID")
    echo "# $a: before $before KiB" >"$samples"
    timeout $((MEM_SECONDS + 40)) python3 "$BENCH_DIR/soak_attacks.py" "$a" "$GW_PORT" "$MEM_SECONDS" \
        >"$BENCH_TMP/mem-$a.out" 2>"$BENCH_TMP/mem-$a.err" &
    apid=$!
    BENCH_PIDS+=("$apid")
    t0=$SECONDS
    while kill -0 "$apid" 2>/dev/null; do
        kill -0 "$GATEWAY_PID" 2>/dev/null || break
        read -r b o < <(gauges)
        [[ "$b" == n/a ]] || ((b <= peak_buf)) || peak_buf=$b
        [[ "$o" == n/a || "$o" == - ]] || ((o <= peak_open)) || peak_open=$o
        echo "attack +$((SECONDS - t0))s rss $(rss_kib "$GATEWAY_PID" 2>/dev/null || echo -) buffers $b open $o" >>"$samples"
        sleep 1
    done
    wait "$apid" 2>/dev/null || true
    local keep=() p
    for p in "${BENCH_PIDS[@]}"; do [[ "$p" == "$apid" ]] || keep+=("$p"); done
    BENCH_PIDS=("${keep[@]}")
    what="$(tail -n 1 "$BENCH_TMP/mem-$a.out" 2>/dev/null)"; [[ -n "$what" ]] || what="no output: $(tail -n 1 "$BENCH_TMP/mem-$a.err" 2>/dev/null)"
    if ! kill -0 "$GATEWAY_PID" 2>/dev/null; then
        emit "| $a | $(mib "$before") | - | - | - | - | - | ERROR: the gateway exited during the attack |"
        MEM_NOTES+=("$a: $what; the gateway exited (see its stderr)")
        stop_pid "$GATEWAY_PID"; return
    fi
    end=$(rss_kib "$GATEWAY_PID")
    echo "end rss $end" >>"$samples"
    # Once a second for up to 60 s; stop once 5 samples in a row are within 20% of before.
    rss=$end
    if ((rss * 5 <= before * 6)); then within=0; streak=1; fi
    t0=$SECONDS
    for t in $(seq 1 60); do
        while ((SECONDS - t0 < t)); do sleep 0.2; done
        rss=$(rss_kib "$GATEWAY_PID")
        read -r b o < <(gauges)
        echo "after +${t}s rss $rss buffers $b open $o" >>"$samples"
        if ((rss * 5 <= before * 6)); then
            [[ -n "$within" ]] || within=$t
            streak=$((streak + 1))
            ((streak < 5)) || break
        else
            within=""; streak=0
        fi
    done
    after=$rss
    hwm=$(hwm_kib "$GATEWAY_PID")
    buf=$b
    if [[ -n "$within" ]]; then
        verdict=PASS
    else
        within=never
        verdict="FAIL: $(mib "$after") MiB after 60 s is $(awk -v a="$after" -v b="$before" 'BEGIN { printf "%.0f", 100 * a / b }')% of $(mib "$before") MiB (peak $(mib "$hwm")), buffers $buf B"
    fi
    emit "| $a | $(mib "$before") | $(mib "$hwm") | $(mib "$end") | $(mib "$after") | $within | $buf | $verdict |"
    pool=$(ss -Htn state established "( dport = :$BACKEND_PORT )" 2>/dev/null | wc -l)
    MEM_NOTES+=("$a: attack printed \`$what\` (kind connections requests); during it gateway_buffer_bytes peaked at $(mib $((peak_buf / 1024))) MiB, open connections at $peak_open; at the last sample $pool upstream connections to the backend")
    [[ -z "$OUT" ]] || cat "$samples" >>"$OUT.samples"
    stop_pid "$GATEWAY_PID"
}

memory_mode() {
    local kinds a env
    command -v wrk >/dev/null || die "wrk not found (make bench installs it)"
    command -v curl >/dev/null || die "curl not found"
    MEM_NOTES=()
    read -r BACKEND_PORT < <(free_ports 1)
    soak_backend_up "$BACKEND_PORT"
    kinds="${MEM_ATTACKS:-$(python3 "$BENCH_DIR/soak_attacks.py" --list | tr ' ' ,)}"
    [[ -z "$OUT" ]] || { : >"$OUT"; : >"$OUT.samples"; }
    env="$(env | grep '^MALLOC_' | sort | tr '\n' ' ' || true)"
    emit "$(identity), memory mode, attacks of ${MEM_SECONDS} s${env:+, environment: ${env% }}"
    emit ""
    emit "| attack | RSS before (MiB) | peak (MiB) | at end of attack (MiB) | after ≤60 s (MiB) | s to within 20% | gateway_buffer_bytes after | verdict |"
    emit "|---|---:|---:|---:|---:|---:|---:|---|"
    IFS=, read -r -a WANT <<<"$kinds"
    for a in "${WANT[@]}"; do
        python3 "$BENCH_DIR/soak_attacks.py" --list | tr ' ' '\n' | grep -qx -- "$a" || die "unknown attack $a (soak_attacks.py --list)"
    done
    for a in "${WANT[@]}"; do
        log "memory: $a"
        memory_row "$a"
    done
    emit ""
    for a in "${MEM_NOTES[@]}"; do emit "- $a"; done
    emit ""
    emit "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    log "done${OUT:+: table in $OUT, samples in $OUT.samples}"
}

if ((MEMORY)); then
    bench_init
    memory_mode
    exit 0
fi

bench_init
ATTACKS="$BENCH_DIR/defects_attacks.py"
read -r BACKEND_PORT STATS_PORT < <(free_ports 2)
python3 "$ATTACKS" backend "$BACKEND_PORT" "$STATS_PORT" >"$BENCH_TMP/backend.log" 2>&1 &
BENCH_PIDS+=("$!")
wait_http "http://127.0.0.1:$STATS_PORT/stats" 15 "$!" || die "the counting backend did not start: $(cat "$BENCH_TMP/backend.log")"
"$GATEWAY_BIN" keygen --key "$BENCH_TMP/key.pem" --jwks "$BENCH_TMP/jwks.json" >/dev/null

# write_defect_config FILE PORT ADMIN THREADS MAX_CONNECTIONS
write_defect_config() {
    cat >"$1" <<EOF
# generated by Benchmarks/defects.sh: keys both the old and the new gateway accept
server:
  listen: ["127.0.0.1:$2"]
  admin_listen: "127.0.0.1:$3"
  threads: $4
  log_level: warning
  limits:
    max_connections: $5
    idle_timeout: 30s
app_check:
  project_number: "123456789012"
  clock_skew: 1s
  jwks: { url: "file://$BENCH_TMP/jwks.json" }
replay:
  store: memory
upstreams:
  api: { url: "http://127.0.0.1:$BACKEND_PORT" }
routes:
  - { name: replay, path: /replay, upstream: api, enforcement: enforce, replay_protection: true }
  - { name: api, prefix: /api/, upstream: api, enforcement: enforce }
  - { name: open, prefix: /, upstream: api, enforcement: off }
EOF
}

# gateway_up ID THREADS MAX_CONNECTIONS [WRAPPER...]: a fresh gateway on fresh ports, ready. Sets GW_PORT ADMIN_PORT.
gateway_up() {
    local id="$1" threads="$2" maxconn="$3" conf
    shift 3
    read -r GW_PORT ADMIN_PORT < <(free_ports 2)
    conf="$BENCH_TMP/gateway-$id.yaml"
    write_defect_config "$conf" "$GW_PORT" "$ADMIN_PORT" "$threads" "$maxconn"
    "$GATEWAY_BIN" check-config --config "$conf" >"$BENCH_TMP/check-$id.log" 2>&1 \
        || die "check-config refused $conf: $(cat "$BENCH_TMP/check-$id.log")"
    start_gateway "$conf" "$ADMIN_PORT" "$@"
    wait_http "http://127.0.0.1:$ADMIN_PORT/readyz" 30 "$GATEWAY_PID" || die "gateway not ready (defect $id)"
}

# attack ID: runs defects_attacks.py against the gateway up now; its row (or a failure row) goes to the table.
attack() {
    local id="$1" row
    if row="$(timeout 200 python3 "$ATTACKS" run "$id" --port "$GW_PORT" --admin "$ADMIN_PORT" --pid "$GATEWAY_PID" \
        --stats "$STATS_PORT" --tmp "$BENCH_TMP" --bin "$GATEWAY_BIN" "${QUICK[@]}" 2>>"$BENCH_TMP/attacks.log")"; then
        [[ -z "$row" ]] || emit "$row"
    else
        emit "| $id | repro failed (exit $?): $(tail -n 1 "$BENCH_TMP/attacks.log" | tr '|' '/') | - | - | - | - | - | - | - | - | ERROR |"
    fi
}

[[ -z "$OUT" ]] || : >"$OUT"
VERSION="$("$GATEWAY_BIN" --version 2>/dev/null | head -n 1)" || VERSION="no --version"
emit "gateway: \`$GATEWAY_BIN\` ($VERSION, sha256 $(sha256sum "$GATEWAY_BIN" | cut -c1-12)), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start${QUICK:+, --quick}"
emit ""
emit "| defect | repro | RSS before | RSS peak | RSS after | CLOSE-WAIT | open | upstream connects | CPU s | observed | verdict |"
emit "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"

IFS=, read -r -a WANT <<<"$DEFECTS"
for d in "${WANT[@]}"; do
    log "defect $d"
    case "$d" in
        1) for v in 1h2 1h1; do gateway_up "$v" 2 100; attack "$v"; stop_pid "$GATEWAY_PID"; done ;;
        2|6|8|9) gateway_up "$d" 1 10000; attack "$d"; stop_pid "$GATEWAY_PID" ;;
        3|4) gateway_up "$d" 2 10000; attack "$d"; stop_pid "$GATEWAY_PID" ;;
        5) gateway_up 5 2 10000 prlimit --nofile=256:256 --; attack 5; stop_pid "$GATEWAY_PID" ;;
        7) gateway_up 7a 1 10000; attack 7a; stop_pid "$GATEWAY_PID"
           gateway_up 7b 1 10000; attack 7b; stop_pid "$GATEWAY_PID" ;;
        *) die "unknown defect $d (1-9)" ;;
    esac
done
emit ""
emit "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
log "done${OUT:+: table in $OUT}"
