#!/usr/bin/env bash
# WebSocket relay throughput (issue 38): 1 KiB binary messages echoed through TUNNELS tunnels, the gateway's
# `websocket: true` route (enforcement off) against nginx `proxy_pass` with `Upgrade` (one worker each), both in
# front of the same echo upstream. Client and upstream are Benchmarks/wsbench.c (one epoll thread each, built here
# with cc), so neither is the bottleneck. Each round runs nginx, then the gateway (alternating, so drift hits both);
# every figure is printed with the load average at its start, and the median of the rounds at the end.
#
# usage: Benchmarks/websocket.sh [--tunnels 64] [--size 1024] [--duration 5] [--rounds 3]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TUNNELS=64
SIZE=1024
DURATION=5
ROUNDS=3
while (($#)); do
    case "$1" in
        --tunnels) TUNNELS="$2"; shift 2 ;;
        --size) SIZE="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for tool in cc nginx python3; do command -v "$tool" >/dev/null || die "$tool not found"; done

bench_init
cc -O2 -o "$BENCH_TMP/wsbench" "$BENCH_DIR/wsbench.c" -lcrypto || die "cannot build wsbench.c (libssl-dev)"
read -r UP_PORT GATEWAY_PORT ADMIN_PORT NGINX_PORT <<<"$(free_ports 4)"

"$BENCH_TMP/wsbench" server "$UP_PORT" >"$BENCH_TMP/upstream.log" 2>&1 &
UP_PID=$!
BENCH_PIDS+=("$UP_PID")

conf="$BENCH_TMP/nginx-ws.conf"
{
    _nginx_common nginx-ws 1
    echo "http {"
    _nginx_http_common nginx-ws
    cat <<NGINX
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=4096;
        location / { return 200 "ok\n"; }
        location /ws {
            proxy_pass http://127.0.0.1:$UP_PORT;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection "upgrade";
            proxy_read_timeout 300s;
            proxy_send_timeout 300s;
        }
    }
}
NGINX
} >"$conf"

write_gateway_config "$BENCH_TMP/gateway.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$UP_PORT" 1 \
    '  - { name: tunnels, prefix: /, upstream: api, enforcement: off, websocket: true }'

run_client() {  # run_client PORT -> prints the rate
    local out
    out="$("$BENCH_TMP/wsbench" client "$1" "$TUNNELS" "$SIZE" "$DURATION" 1)" || { echo "$out" >&2; die "wsbench client failed on port $1"; }
    echo "$out" >&2
    echo "$out" | sed -n 's/.*rate=\([0-9]*\)\/s.*/\1/p'
}

declare -a NG GW
for ((r = 1; r <= ROUNDS; r++)); do
    _start_nginx nginx-ws "$conf" "$NGINX_PORT"
    log "round $r, nginx (load $(cut -d' ' -f1-3 /proc/loadavg))"
    NG+=("$(run_client "$NGINX_PORT")")
    stop_pid "$NGINX_PID"
    start_gateway "$BENCH_TMP/gateway.yaml" "$ADMIN_PORT"
    log "round $r, gateway (load $(cut -d' ' -f1-3 /proc/loadavg))"
    GW+=("$(run_client "$GATEWAY_PORT")")
    stop_pid "$GATEWAY_PID"
done

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ng="$(median "${NG[@]}")"; gw="$(median "${GW[@]}")"
echo
echo "WebSocket echo, $TUNNELS tunnels, $SIZE-byte messages, ${DURATION}s per round, $ROUNDS rounds (load at end: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| proxy | messages/s (median) | rounds |"
echo "|---|---:|---|"
echo "| nginx proxy_pass + Upgrade | $ng | ${NG[*]} |"
echo "| gateway websocket: true | $gw | ${GW[*]} |"
awk -v g="$gw" -v n="$ng" 'BEGIN { printf "\ngateway / nginx: %.2f\n", g / n }'
