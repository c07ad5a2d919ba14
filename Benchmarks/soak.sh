#!/usr/bin/env bash
# Soak (issue 15): mixed valid traffic for MINUTES (default 60) while every attack of Benchmarks/soak_attacks.py runs
# in rotation against the same release gateway, one per ~30 s. Each minute it records the gateway's RSS, its sockets
# in CLOSE-WAIT, its open connections (gateway_connections{state="open"}) and the valid requests that failed.
# At the end (traffic and attacks stopped, 15 s to settle) it passes when:
#   - RSS is within 20% of the first minute's,
#   - no socket of the gateway is left in CLOSE-WAIT and no client connection is counted open,
#   - no valid request failed (wrk's non-2xx/3xx and socket errors: connect, read, write, timeout).
# Run by hand (it is not part of make test):
#
#   make release && Benchmarks/soak.sh                # one hour
#   Benchmarks/soak.sh --minutes 5                    # a short run
#
# Valid traffic: wrk, 1 thread, 16 connections, alternating 30 s on an `off` route and an `enforce` route with a
# session token (local issuer, keygen + mint). Backend: nginx (static `ok`, and /big = 10 MB). Output: one line per
# minute and a verdict; the table also goes to Benchmarks/out/soak-<date>.md.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

MINUTES=60
while (($#)); do
    case "$1" in
        --minutes) MINUTES="$2"; shift 2 ;;
        *) echo "usage: $0 [--minutes N]" >&2; exit 2 ;;
    esac
done
command -v wrk >/dev/null || die "wrk not found (make bench installs it)"
command -v nginx >/dev/null || die "nginx not found (make bench installs it)"

bench_init
read -r GW_PORT ADMIN_PORT BACKEND_PORT < <(free_ports 3)

# Backend: `ok` for everything, 10 MB at /big (zero-window streams), a sink for uploads.
head -c 10000000 /dev/zero | tr '\0' b >"$BENCH_TMP/big.bin"
{
    _nginx_common backend 1
    echo "http {"
    _nginx_http_common backend
    cat <<EOF
    server {
        listen 127.0.0.1:$BACKEND_PORT backlog=4096;
        client_max_body_size 20m;
        location = /big { alias $BENCH_TMP/big.bin; }
        location / { return 200 "ok\n"; }
    }
}
EOF
} >"$BENCH_TMP/backend.conf"
_start_nginx backend "$BENCH_TMP/backend.conf" "$BACKEND_PORT"

"$GATEWAY_BIN" keygen --key "$BENCH_TMP/key.pem" --jwks "$BENCH_TMP/jwks.json" >/dev/null
TOKEN="$("$GATEWAY_BIN" mint --key "$BENCH_TMP/key.pem" --project-number 123456789012 \
    --app-id 1:123456789012:ios:abc123 --ttl 7d)"
GATEWAY_APP_CHECK_YAML="  jwks: { url: \"file://$BENCH_TMP/jwks.json\" }"
write_gateway_config "$BENCH_TMP/gateway.yaml" "$GW_PORT" "$ADMIN_PORT" "$BACKEND_PORT" 2 "$(cat <<EOF
  - { name: api, prefix: /api/, upstream: api, enforcement: enforce }
  - { name: open, prefix: /, upstream: api, enforcement: off, max_body_bytes: 20MiB }
EOF
)"
start_gateway "$BENCH_TMP/gateway.yaml" "$ADMIN_PORT"
log "soak: gateway pid $GATEWAY_PID on $GW_PORT, $MINUTES minute(s)"

open_connections() {
    curl -s -m 2 "http://127.0.0.1:$ADMIN_PORT/metrics" | awk '/^gateway_connections\{state="open"\}/ { print $2 }'
}
close_wait() {  # the gateway's sockets in CLOSE-WAIT on its listener port
    ss -Htan state close-wait "( sport = :$GW_PORT )" 2>/dev/null | wc -l
}

# Valid traffic in the background: 30 s wrk runs, alternating routes; failures summed in $BENCH_TMP/failed.
echo 0 >"$BENCH_TMP/failed"
echo 0 >"$BENCH_TMP/valid"
cat >"$BENCH_TMP/token.lua" <<EOF
wrk.headers["X-Firebase-AppCheck"] = "$TOKEN"
EOF
(
    i=0
    while [ ! -e "$BENCH_TMP/stop" ]; do
        if (( i % 2 )); then url="http://127.0.0.1:$GW_PORT/api/orders"; script=(-s "$BENCH_TMP/token.lua")
        else url="http://127.0.0.1:$GW_PORT/"; script=(); fi
        out="$(wrk -t1 -c16 -d30s --timeout 5s "${script[@]}" "$url" 2>&1 || true)"
        reqs=$(awk '/requests in/ { print $1 }' <<<"$out"); reqs=${reqs:-0}
        non2xx=$(awk '/Non-2xx/ { print $NF }' <<<"$out"); non2xx=${non2xx:-0}
        sockerr=$(awk -F'[ ,]+' '/Socket errors/ { print $4 + $6 + $8 + $10 }' <<<"$out"); sockerr=${sockerr:-0}
        echo $(( $(cat "$BENCH_TMP/failed") + non2xx + sockerr )) >"$BENCH_TMP/failed"
        echo $(( $(cat "$BENCH_TMP/valid") + reqs )) >"$BENCH_TMP/valid"
        i=$((i + 1))
    done
) &
BENCH_PIDS+=("$!")

# Attacks in rotation, 25 s each.
ATTACKS=(rapid-reset zero-window close-mid-body slow-body silent underscore hostile-tokens smuggling)
(
    i=0
    while [ ! -e "$BENCH_TMP/stop" ]; do
        a=${ATTACKS[$(( i % ${#ATTACKS[@]} ))]}
        python3 "$BENCH_DIR/soak_attacks.py" "$a" "$GW_PORT" 25 >>"$BENCH_TMP/attacks.log" 2>&1 || true
        i=$((i + 1))
    done
) &
BENCH_PIDS+=("$!")

mkdir -p "$BENCH_DIR/out"
REPORT="$BENCH_DIR/out/soak-$(date +%Y%m%d-%H%M%S).md"
{
    echo "| minute | RSS (MiB) | CLOSE-WAIT | open connections | valid requests | failed |"
    echo "|---:|---:|---:|---:|---:|---:|"
} | tee "$REPORT"
FIRST_RSS=""
for m in $(seq 1 "$MINUTES"); do
    sleep 60
    kill -0 "$GATEWAY_PID" 2>/dev/null || die "the gateway exited during the soak (see $BENCH_TMP/gateway.stderr.log)"
    rss=$(rss_kib "$GATEWAY_PID")
    [ -n "$FIRST_RSS" ] || FIRST_RSS=$rss
    printf '| %d | %.1f | %s | %s | %s | %s |\n' "$m" "$(echo "$rss / 1024" | bc -l)" "$(close_wait)" "$(open_connections)" \
        "$(cat "$BENCH_TMP/valid")" "$(cat "$BENCH_TMP/failed")" | tee -a "$REPORT"
done

touch "$BENCH_TMP/stop"
log "soak: stopping traffic and attacks (up to 35 s), then 15 s to settle"
for _ in $(seq 1 70); do pgrep -f "soak_attacks.py|wrk -t1 -c16" >/dev/null || break; sleep 0.5; done
sleep 15
rss=$(rss_kib "$GATEWAY_PID"); cw=$(close_wait); open=$(open_connections); failed=$(cat "$BENCH_TMP/failed")
valid=$(cat "$BENCH_TMP/valid")
attacks=$(wc -l <"$BENCH_TMP/attacks.log")
verdict=PASS
ratio=$(echo "$rss / $FIRST_RSS" | bc -l)
(( $(echo "$ratio > 1.2" | bc -l) )) && verdict=FAIL
[ "$cw" = 0 ] || verdict=FAIL
[ "${open:-x}" = 0 ] || verdict=FAIL
[ "$failed" = 0 ] || verdict=FAIL
{
    echo
    printf 'end: RSS %.1f MiB (%.0f%% of the first minute'"'"'s %.1f MiB), CLOSE-WAIT %s, open connections %s, ' \
        "$(echo "$rss / 1024" | bc -l)" "$(echo "$ratio * 100" | bc -l)" "$(echo "$FIRST_RSS / 1024" | bc -l)" "$cw" "$open"
    echo "valid requests $valid, failed $failed, attack runs $attacks: $verdict"
} | tee -a "$REPORT"
log "soak: report in $REPORT"
[ "$verdict" = PASS ]
