#!/usr/bin/env bash
# WebSocket relay throughput (issue 38): 1 KiB binary messages echoed through TUNNELS tunnels, the gateway's
# `websocket: true` route (enforcement off) against nginx `proxy_pass` with `Upgrade` (one worker each), both in
# front of the same echo upstream. Client and upstream are Benchmarks/wsbench.c (one epoll thread each, built here
# with cc), so neither is the bottleneck. Each round runs nginx, then the gateway (alternating, so drift hits both);
# every figure is printed with the load average at its start, and the median of the rounds at the end.
#
# With --callgrind, instead: each proxy (the gateway's thread, nginx as one process) runs under valgrind's callgrind
# and the figure is its instructions per echoed message (MESSAGES echoes after 2,000 unmeasured ones; the 64
# handshakes of the measured client run are inside the window on both sides): repeatable on a busy machine.
#
# With --cpu, instead: the CPU time each proxy spends (user and system, from /proc/PID/stat, all its threads) on
# MESSAGES echoes after 2,000 unmeasured ones, nginx then the gateway in each of ROUNDS rounds: what the relay costs
# the machine, kernel included, which callgrind does not see (its socket calls are most of it). Less noisy than
# messages/s on a shared machine, though other load still inflates both.
#
# usage: Benchmarks/websocket.sh [--tunnels 64] [--size 1024] [--duration 5] [--rounds 3]
#                                [--callgrind [--messages 20000] | --cpu [--messages 200000]]
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TUNNELS=64
SIZE=1024
DURATION=5
ROUNDS=3
CALLGRIND=0
CPU=0
MESSAGES=20000
while (($#)); do
    case "$1" in
        --tunnels) TUNNELS="$2"; shift 2 ;;
        --size) SIZE="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --callgrind) CALLGRIND=1; shift ;;
        --cpu) CPU=1; shift ;;
        --messages) MESSAGES="$2"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

if ((CPU)); then
    ((CALLGRIND)) && die "--cpu and --callgrind are two different measurements: pick one"
    [[ "$MESSAGES" == 20000 ]] && MESSAGES=200000
    tck="$(getconf CLK_TCK)"
    ticks() { awk '{ print $14 + $15, $14, $15 }' "/proc/$1/stat"; }   # utime + stime of the whole process
    # cpu_measure NAME PID PORT: warm-up, MESSAGES echoes; prints "total user system" ticks of those echoes.
    cpu_measure() {
        local name="$1" pid="$2" port="$3" before after line
        "$BENCH_TMP/wsbench" client "$port" "$TUNNELS" "$SIZE" 600 0 2000 >/dev/null || die "$name: warm-up failed"
        read -r -a before <<<"$(ticks "$pid")"
        line="$("$BENCH_TMP/wsbench" client "$port" "$TUNNELS" "$SIZE" 600 0 "$MESSAGES")" || die "$name: client failed: $line"
        read -r -a after <<<"$(ticks "$pid")"
        echo "$((after[0] - before[0])) $((after[1] - before[1])) $((after[2] - before[2]))"
    }
    sed -i 's/^master_process on;/master_process off;/' "$conf"   # one process: the worker is the one measured
    declare -a NGT GWT
    echo
    echo "WebSocket echo, CPU time per 100,000 echoed messages ($TUNNELS tunnels, $SIZE-byte messages, $MESSAGES measured per round; ms, user + system)"
    echo
    echo "| round | load | nginx total (user / system) | gateway total (user / system) | gateway / nginx |"
    echo "|---|---|---:|---:|---:|"
    for ((r = 1; r <= ROUNDS; r++)); do
        load="$(cut -d' ' -f1 /proc/loadavg)"
        _start_nginx nginx-ws "$conf" "$NGINX_PORT"
        read -r nt nu ns <<<"$(cpu_measure nginx "$NGINX_PID" "$NGINX_PORT")"
        stop_pid "$NGINX_PID"
        start_gateway "$BENCH_TMP/gateway.yaml" "$ADMIN_PORT"
        read -r gt gu gs <<<"$(cpu_measure gateway "$GATEWAY_PID" "$GATEWAY_PORT")"
        stop_pid "$GATEWAY_PID"
        ms() { awk -v t="$1" -v tck="$tck" -v m="$MESSAGES" 'BEGIN { printf "%.0f", t * 1000 / tck * 100000 / m }'; }
        NGT+=("$(ms "$nt")"); GWT+=("$(ms "$gt")")
        echo "| $r | $load | $(ms "$nt") ($(ms "$nu") / $(ms "$ns")) | $(ms "$gt") ($(ms "$gu") / $(ms "$gs")) | $(awk -v g="$gt" -v n="$nt" 'BEGIN { printf "%.2f", g / n }') |"
    done
    ng="$(median "${NGT[@]}")"; gw="$(median "${GWT[@]}")"
    echo
    echo "medians: nginx $ng ms, gateway $gw ms per 100,000 messages; gateway / nginx: $(awk -v g="$gw" -v n="$ng" 'BEGIN { printf "%.2f", g / n }') (below 1: the gateway uses less CPU)"
    exit 0
fi

if ((CALLGRIND)); then
    for tool in valgrind callgrind_control objcopy; do command -v "$tool" >/dev/null || die "$tool not found"; done
    objcopy --strip-debug "$GATEWAY_BIN" "$BENCH_TMP/appcheck-gateway"   # valgrind 3.19 cannot read Swift's DWARF 5
    # cg_measure NAME PID PORT OUT: warm-up, zero, MESSAGES echoes, dump; prints instructions per echoed message.
    cg_measure() {
        local name="$1" pid="$2" port="$3" out="$4" line n dump ir
        "$BENCH_TMP/wsbench" client "$port" "$TUNNELS" "$SIZE" 600 0 2000 >/dev/null || die "$name: warm-up failed"
        callgrind_control -z "$pid" >/dev/null
        line="$("$BENCH_TMP/wsbench" client "$port" "$TUNNELS" "$SIZE" 600 0 "$MESSAGES")" || die "$name: client failed: $line"
        callgrind_control -d "$pid" >/dev/null
        n="$(sed -n 's/^messages=\([0-9]*\).*/\1/p' <<<"$line")"
        dump="$(ls -t "$out.$pid".* 2>/dev/null | head -n 1 || true)"
        ir="$(awk '/^(summary|totals):/ { print $2; exit }' "$dump")"
        [[ -n "$ir" && -n "$n" && "$n" -gt 0 ]] || die "$name: no instruction total or message count"
        mkdir -p "$BENCH_DIR/out"
        cp "$dump" "$BENCH_DIR/out/callgrind-websocket-$(date +%Y%m%d-%H%M%S)-$name.out"
        awk -v ir="$ir" -v n="$n" 'BEGIN { printf "%.0f", ir / n }'
    }
    sed -i 's/^master_process on;/master_process off;/' "$conf"   # one process: the worker is the one measured
    NGINX_WRAPPER="valgrind --tool=callgrind --callgrind-out-file=$BENCH_TMP/cg-nginx.out.%p --dump-instr=no --vgdb=yes" \
        NGINX_START_TIMEOUT=120 _start_nginx nginx-ws "$conf" "$NGINX_PORT"
    ng="$(cg_measure nginx "$NGINX_PID" "$NGINX_PORT" "$BENCH_TMP/cg-nginx.out")"
    stop_pid "$NGINX_PID"
    GATEWAY_BIN="$BENCH_TMP/appcheck-gateway" GATEWAY_START_TIMEOUT=180 start_gateway "$BENCH_TMP/gateway.yaml" "$ADMIN_PORT" \
        valgrind --tool=callgrind --callgrind-out-file="$BENCH_TMP/cg-gateway.out.%p" --dump-instr=no --vgdb=yes
    gw="$(cg_measure gateway "$GATEWAY_PID" "$GATEWAY_PORT" "$BENCH_TMP/cg-gateway.out")"
    stop_pid "$GATEWAY_PID"
    echo
    echo "WebSocket echo under callgrind: $TUNNELS tunnels, $SIZE-byte messages, $MESSAGES echoes measured"
    echo
    echo "| proxy | instructions per echoed message |"
    echo "|---|---:|"
    echo "| nginx proxy_pass + Upgrade | $ng |"
    echo "| gateway websocket: true | $gw |"
    awk -v g="$gw" -v n="$ng" 'BEGIN { printf "\ngateway / nginx: %.2f\n", g / n }'
    exit 0
fi

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

ng="$(median "${NG[@]}")"; gw="$(median "${GW[@]}")"
echo
echo "WebSocket echo, $TUNNELS tunnels, $SIZE-byte messages, ${DURATION}s per round, $ROUNDS rounds (load at end: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| proxy | messages/s (median) | rounds |"
echo "|---|---:|---|"
echo "| nginx proxy_pass + Upgrade | $ng | ${NG[*]} |"
echo "| gateway websocket: true | $gw | ${GW[*]} |"
awk -v g="$gw" -v n="$ng" 'BEGIN { printf "\ngateway / nginx: %.2f\n", g / n }'
