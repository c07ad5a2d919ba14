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
# session token (local issuer, keygen + mint); and a well-behaved client at its own address, 127.0.0.2 (issues 25
# and 39): every 200 ms it exchanges a debug secret, GETs the `off` route and GETs the `enforce` route with the
# token, and every second exchanges a fresh custom token (each must be answered 200, exchanges with a token) while
# every attack (exchange and challenge floods, slow issuer bodies, hostile CBOR, custom-token replays, zero-window
# churn, ...) comes from 127.0.0.1 — the address wrk shares, since wrk cannot pick its source address — except
# zero-window-churn, from 127.0.0.3 (issue 39: one address's churn must not spend the others' upstream share). Backend:
# nginx (static `ok`, and /big = 10 MB). Output: one line per minute and a verdict; the table, the well-behaved
# address's own counts (requests, failures by status) and the attacks' goes to Benchmarks/out/soak-<date>.md.
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

bench_init
read -r GW_PORT ADMIN_PORT BACKEND_PORT < <(free_ports 3)

# Backend (nginx: `ok`, /big = 10 MB, an upload sink), keys, the issuer and the gateway: lib.sh's soak_backend_up
# and soak_gateway_up (defects.sh --memory starts the same).
soak_backend_up "$BACKEND_PORT"
soak_gateway_up "$BENCH_TMP/gateway.yaml" "$GW_PORT" "$ADMIN_PORT" "$BACKEND_PORT"
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

# Valid issuer exchanges from 127.0.0.2, counted in xvalid/xfailed every 30 s (failures are printed to
# $BENCH_TMP/exchanges.log); the report adds them to wrk's.
echo 0 >"$BENCH_TMP/xfailed"
echo 0 >"$BENCH_TMP/xvalid"
SOAK_TOKEN="$TOKEN" python3 - "$GW_PORT" "$BENCH_TMP" "$SOAK_APP" "$SOAK_SECRET" <<'PY' >>"$BENCH_TMP/exchanges.log" 2>&1 &
import json, os, socket, subprocess, sys, time
port, tmp, app, secret = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
base = "/appcheck/v1/projects/123456789012/apps/%s:" % app
def request(raw):
    """(status or "no answer", first bytes) of one request on its own connection from 127.0.0.2."""
    try:
        s = socket.socket(); s.settimeout(5); s.bind(("127.0.0.2", 0)); s.connect(("127.0.0.1", port))
        s.sendall(raw); out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk: break
            out += chunk
        s.close()
    except OSError as e:
        return "error " + type(e).__name__, repr(e).encode()
    parts = out.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/"): return "no answer", out[:300]
    return parts[1].decode(errors="replace"), out
def post(method, body):
    data = json.dumps(body).encode()
    status, out = request(("POST %s%s HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                           "Connection: close\r\n\r\n" % (base, method, len(data))).encode() + data)
    if status == "200" and b'"token":"' not in out: status = "200 without a token"
    return status, out[:300]
def get(path, token=None):
    header = "X-Firebase-AppCheck: %s\r\n" % token if token else ""
    status, out = request(("GET %s HTTP/1.1\r\nHost: gw\r\n%sConnection: close\r\n\r\n" % (path, header)).encode())
    return status, out[:300]
# The address's own counts, written whole every 30 s: requests by kind, answers by status.
counts = {"requests": 0, "issuer": 0, "proxied": 0, "by_status": {}}
ok = failed = 0; last = time.time(); tick = 0
def note(kind, status, what):
    global ok, failed
    counts["requests"] += 1; counts[kind] += 1
    counts["by_status"][status] = counts["by_status"].get(status, 0) + 1
    if status == "200": ok += 1
    else:
        failed += 1
        print(kind, "request failed:", status, what, flush=True)
while True:
    stopping = os.path.exists(os.path.join(tmp, "stop"))
    if not stopping:
        tick += 1
        note("issuer", *post("exchangeDebugToken", {"debug_token": secret}))
        note("proxied", *get("/"))
        note("proxied", *get("/api/orders", os.environ["SOAK_TOKEN"]))
        if tick % 5 == 0:
            cmd = os.environ["SOAK_CUSTOM_TOKEN_CMD"]
            token = subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()
            note("issuer", *post("exchangeCustomToken", {"custom_token": token}))
    if time.time() - last >= 30 or stopping:
        for name, n in (("xvalid", ok), ("xfailed", failed)):
            path = os.path.join(tmp, name)
            with open(path) as f: total = int(f.read().strip() or 0)
            with open(path + ".tmp", "w") as f: f.write(str(total + n))
            os.replace(path + ".tmp", path)
        with open(os.path.join(tmp, "good.json.tmp"), "w") as f: json.dump(counts, f)
        os.replace(os.path.join(tmp, "good.json.tmp"), os.path.join(tmp, "good.json"))
        ok = failed = 0; last = time.time()
    if stopping: break
    time.sleep(0.2)
PY
BENCH_PIDS+=("$!")

# Attacks in rotation, 25 s each (zero-window-churn from 127.0.0.3, the rest from 127.0.0.1).
ATTACKS=(rapid-reset issuer-flood zero-window zero-window-churn challenge-flood close-mid-body issuer-slow-body slow-body hostile-cbor
         silent custom-replay underscore hostile-tokens smuggling)
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
        "$(( $(cat "$BENCH_TMP/valid") + $(cat "$BENCH_TMP/xvalid") ))" \
        "$(( $(cat "$BENCH_TMP/failed") + $(cat "$BENCH_TMP/xfailed") ))" | tee -a "$REPORT"
done

touch "$BENCH_TMP/stop"
log "soak: stopping traffic and attacks (up to 35 s), then 15 s to settle"
for _ in $(seq 1 70); do pgrep -f "soak_attacks.py|wrk -t1 -c16" >/dev/null || break; sleep 0.5; done
[ ! -s "$BENCH_TMP/exchanges.log" ] || { log "soak: failed exchanges:"; head -n 5 "$BENCH_TMP/exchanges.log" >&2; }
sleep 15
rss=$(rss_kib "$GATEWAY_PID"); cw=$(close_wait); open=$(open_connections)
failed=$(( $(cat "$BENCH_TMP/failed") + $(cat "$BENCH_TMP/xfailed") ))
valid=$(( $(cat "$BENCH_TMP/valid") + $(cat "$BENCH_TMP/xvalid") ))
exchanges=$(cat "$BENCH_TMP/xvalid")
attacks=$(wc -l <"$BENCH_TMP/attacks.log")
# The well-behaved address's own counts, and each attack's runs and what it sent (soak_attacks.py prints one
# "NAME CONNECTIONS REQUESTS" line per run).
good_summary=$(python3 - "$BENCH_TMP/good.json" <<'PY'
import json, sys
try: c = json.load(open(sys.argv[1]))
except (OSError, ValueError): c = {"requests": 0, "issuer": 0, "proxied": 0, "by_status": {}}
bad = {k: v for k, v in sorted(c["by_status"].items()) if k != "200"}
print("well-behaved address 127.0.0.2: %d requests (%d issuer exchanges, %d proxied), %d failed%s" % (
    c["requests"], c["issuer"], c["proxied"], sum(bad.values()),
    (" (by status: " + ", ".join("%s x %d" % kv for kv in bad.items()) + ")") if bad else ""))
PY
)
attack_summary=$(python3 - "$BENCH_TMP/attacks.log" <<'PY'
import sys
runs = {}
for line in open(sys.argv[1], errors="replace"):
    f = line.split()
    if len(f) != 3 or not f[1].isdigit() or not f[2].isdigit(): continue
    a = runs.setdefault(f[0], {"runs": 0, "connections": 0, "requests": 0})
    a["runs"] += 1; a["connections"] += int(f[1]); a["requests"] += int(f[2])
print("attacks (from 127.0.0.1; zero-window-churn from 127.0.0.3): " + ("; ".join("%s %d runs, %d connections, %d requests" % (k, v["runs"], v["connections"],
      v["requests"]) for k, v in sorted(runs.items())) or "none"))
PY
)
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
    echo "valid requests $valid (of them from 127.0.0.2 $exchanges), failed $failed, attack runs $attacks: $verdict"
    echo
    echo "$good_summary"
    echo "$attack_summary"
} | tee -a "$REPORT"
log "soak: report in $REPORT"
[ "$verdict" = PASS ]
