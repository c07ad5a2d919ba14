#!/usr/bin/env bash
# Instructions per request for the gateway's `off` route, under valgrind --tool=callgrind (threads 1).
#
# usage: Benchmarks/callgrind.sh [--requests 20000] [--warmup 2000] [--top 25]
#
# Wall-clock numbers on a shared 2-core machine are noisy; instruction counts for a fixed number of requests
# are repeatable to well under 1%, so compare this figure before/after a change. The measured window is
# exactly the N requests: counters are zeroed (callgrind_control -z) after start-up and the warm-up requests,
# and dumped (callgrind_control -d) right after the last response. One keep-alive connection, sequential
# requests (Benchmarks/kaclient.py), static nginx backend. Needs `make release` first.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REQUESTS=20000
WARMUP=2000
TOP=25
while (($#)); do
    case "$1" in
        --requests) REQUESTS="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --top) TOP="$2"; shift 2 ;;
        -h|--help) sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for tool in objcopy valgrind callgrind_control callgrind_annotate nginx python3; do
    command -v "$tool" >/dev/null || die "$tool not found (make bench installs valgrind and nginx-light)"
done

bench_init
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT_DIR="$BENCH_DIR/out"
mkdir -p "$OUT_DIR"
read -r BACKEND_PORT GATEWAY_PORT ADMIN_PORT <<<"$(free_ports 3)"

start_backend "$BACKEND_PORT"
write_gateway_config "$BENCH_TMP/gateway.yaml" "$GATEWAY_PORT" "$ADMIN_PORT" "$BACKEND_PORT" 1
CG_OUT="$BENCH_TMP/callgrind.out"
# Valgrind 3.19 (bookworm) cannot read the DWARF 5 debug info Swift emits ("unhandled dwarf2 abbrev form
# code 0x25 ... I can't recover"), so profile a copy with the debug sections stripped; the symbol table stays,
# so function names still resolve.
objcopy --strip-debug "$GATEWAY_BIN" "$BENCH_TMP/appcheck-gateway"
GATEWAY_BIN="$BENCH_TMP/appcheck-gateway"
log "starting the gateway under callgrind (slow start-up is normal)"
GATEWAY_START_TIMEOUT=180 start_gateway "$BENCH_TMP/gateway.yaml" "$ADMIN_PORT" \
    valgrind --tool=callgrind --callgrind-out-file="$CG_OUT.%p" --dump-instr=no --vgdb=yes

log "warm-up: $WARMUP requests"
python3 "$BENCH_DIR/kaclient.py" --port "$GATEWAY_PORT" --requests "$WARMUP" >/dev/null
callgrind_control -z "$GATEWAY_PID" >/dev/null
log "measuring: $REQUESTS requests on one keep-alive connection"
python3 "$BENCH_DIR/kaclient.py" --port "$GATEWAY_PORT" --requests "$REQUESTS"
callgrind_control -d "$GATEWAY_PID" >/dev/null

DUMP="$(ls -t "$CG_OUT.$GATEWAY_PID".* 2>/dev/null | head -n 1 || true)"
[[ -n "$DUMP" && -s "$DUMP" ]] || die "no callgrind dump found next to $CG_OUT.$GATEWAY_PID"
IR="$(awk '/^(summary|totals):/ { print $2; exit }' "$DUMP")"
[[ -n "$IR" ]] || die "no instruction total in $DUMP"
KEEP="$OUT_DIR/callgrind-$STAMP.out"
cp "$DUMP" "$KEEP"

echo
echo "gateway $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$REPO_ROOT" diff --quiet 2>/dev/null || echo '+dirty'), off route, threads 1, $REQUESTS requests after $WARMUP warm-up"
awk -v ir="$IR" -v n="$REQUESTS" 'BEGIN { printf "instructions (Ir): %d total, %.0f per request\n", ir, ir / n }'
echo
echo "top $TOP functions by self Ir in the measured window (thread entry frames that show 100% are left out):"
DEMANGLE=cat
if command -v swift-demangle >/dev/null; then DEMANGLE="swift-demangle --simplified"
elif [[ -x "$(dirname "$(readlink -f "$(command -v swift 2>/dev/null || echo /nonexistent)")")/swift-demangle" ]]; then
    DEMANGLE="$(dirname "$(readlink -f "$(command -v swift)")")/swift-demangle --simplified"
fi
callgrind_annotate --inclusive=no --threshold=100 "$KEEP" 2>/dev/null \
    | awk '/^-+$/ { sep++; next } sep >= 4 && NF && !/\(100\.0%\)/' | head -n "$TOP" | $DEMANGLE | cut -c1-200
echo
log "profile kept at $KEEP (open with callgrind_annotate or kcachegrind)"
