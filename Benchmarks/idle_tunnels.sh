#!/usr/bin/env bash
# Memory per idle WebSocket tunnel (issue 35), run by hand: Benchmarks/wsbench.c's echo server as the upstream, a
# gateway with one `websocket: true` route (enforcement off), and wsbench's `idle` client, which opens COUNT
# tunnels, echoes one 4 KiB message through each (so both directions' buffers were used once) and then keeps them
# idle. Prints the gateway's VmRSS before and with the tunnels open, the difference per tunnel, its open file
# descriptors, gateway_connections{state="tunnel"} and the io buffer bytes. Needs cc, libssl-dev and the built
# binary.
#
# usage: Benchmarks/idle_tunnels.sh [COUNT]      (default 1000; 10000 needs `ulimit -n` above 2 x COUNT + 100)
# Environment: APPCHECK_GATEWAY_BIN (default .build/release/appcheck-gateway, else .build/debug/appcheck-gateway).
set -euo pipefail
count="${1:-1000}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${APPCHECK_GATEWAY_BIN:-}"
if [ -z "$bin" ]; then
  bin="$root/.build/release/appcheck-gateway"
  [ -x "$bin" ] || bin="$root/.build/debug/appcheck-gateway"
fi
[ -x "$bin" ] || { echo "idle_tunnels: $bin not found; run 'swift build' first" >&2; exit 1; }
ulimit -n $((2 * count + 200)) 2>/dev/null || true

work="$(mktemp -d "${TMPDIR:-/tmp}/idle-tunnels.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up_port="$(free_port)"; gw_port="$(free_port)"; admin_port="$(free_port)"

cc -O2 -o "$work/wsbench" "$root/Benchmarks/wsbench.c" -lcrypto || { echo "idle_tunnels: cannot build wsbench.c (libssl-dev)" >&2; exit 1; }
cat >"$work/gateway.yaml" <<YAML
server:
  listen: ["127.0.0.1:$gw_port"]
  admin_listen: "127.0.0.1:$admin_port"
  threads: 1
  log_level: warning
  limits:
    max_connections: $((count + 100))
    max_connections_per_address: 0
app_check:
  project_number: "123456789012"
  jwks: { url: "file://$work/none.json" }
upstreams:
  ws: { url: "http://127.0.0.1:$up_port" }
routes:
  - { name: tunnels, prefix: /, upstream: ws, enforcement: off, websocket: true }
YAML
echo '{"keys":[]}' >"$work/none.json"

"$work/wsbench" server "$up_port" &
pids+=($!)
"$bin" serve --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 &
gw=$!
pids+=($gw)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$admin_port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
sleep 1
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$gw/status"; }
before="$(rss)"
"$work/wsbench" idle "$gw_port" "$count" 4096 >"$work/clients.out" 2>"$work/clients.err" &
pids+=($!)
for _ in $(seq 1 600); do [ -s "$work/clients.out" ] && break; kill -0 "${pids[-1]}" 2>/dev/null || break; sleep 0.5; done
[ -s "$work/clients.out" ] || { echo "idle_tunnels: clients did not finish: $(tail -3 "$work/clients.err")" >&2; exit 1; }
sleep 2
after="$(rss)"
metrics="$(curl -s "http://127.0.0.1:$admin_port/metrics")"
tunnels="$(echo "$metrics" | awk '/^gateway_connections\{state="tunnel"\}/ {print $2}')"
io="$(echo "$metrics" | awk '/^gateway_buffer_bytes\{kind="io"\}/ {print $2}')"
echo "binary: $bin"
echo "tunnels open: $(cat "$work/clients.out") (gateway_connections{state=\"tunnel\"} $tunnels), io buffers ${io} bytes"
echo "gateway VmRSS: ${before} KiB before, ${after} KiB with the tunnels idle; $(ls /proc/$gw/fd | wc -l) open descriptors"
awk -v b="$before" -v a="$after" -v n="$count" 'BEGIN { printf "per idle tunnel: %.1f KiB (client connection + upstream connection + relay)\n", (a - b) / n }'
