#!/usr/bin/env bash
# `make fuzz-smoke`: every target in Fuzz/Targets for FUZZ_SECONDS each (default `smoke_seconds` in Fuzz/options.sh:
# 8 s), one after another, from
# the committed seed corpus (new finds go to a temporary directory; the repository is not written). Fails on
# any crash, leak, timeout or out-of-memory. Ends with `fuzz-smoke: PASS (N targets, E executions, Ts)` or
# `fuzz-smoke: FAIL: …`.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
Fuzz/build.sh || { echo "fuzz-smoke: FAIL: build"; exit 1; }
source Fuzz/options.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=()
total=0
for t in $(cd Fuzz/Targets && ls *.swift | sed 's/\.swift$//'); do
  mkdir -p "$tmp/$t" "$tmp/artifacts-$t"
  seconds=$(smoke_seconds "$t")
  # Bounded even if libFuzzer itself hangs: its own limit plus a minute.
  timeout $((seconds + 60)) "Fuzz/out/$t" -max_total_time="$seconds" "${FUZZ_FLAGS[@]}" -max_len="$(max_len "$t")" \
    $(dict_flag "$t") -artifact_prefix="$tmp/artifacts-$t/" -print_final_stats=1 "$tmp/$t" "Fuzz/corpus/$t" \
    >"$tmp/$t.log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$tmp/$t.log" | grep -o '[0-9]*$' || echo 0)
  total=$((total + ${runs:-0}))
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    echo "fuzz-smoke: $t FAILED (exit $rc, ${runs:-0} executions):"
    grep -E 'ERROR|SUMMARY|Fatal error|Test unit written|Base64' "$tmp/$t.log" | head -20
    for a in "$tmp/artifacts-$t"/*; do [ -f "$a" ] && echo "  input (base64): $(base64 -w0 "$a" | head -c 2000)"; done
  else
    echo "fuzz-smoke: $t ok, ${runs:-0} executions in ${seconds}s"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz-smoke: FAIL: ${failed[*]}"
  exit 1
fi
echo "fuzz-smoke: PASS ($(ls Fuzz/Targets/*.swift | wc -l) targets, $total executions, $(( $(date +%s) - START ))s)"
