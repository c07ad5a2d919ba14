#!/usr/bin/env bash
# A campaign by hand: every target (or the ones named) run to a number of executions, one after another on one
# core, each continuing from its grown corpus (Fuzz/out/corpus/TARGET). Stops at the first finding.
#   Fuzz/campaign.sh                        every target to 10 million executions
#   RUNS=2000000 Fuzz/campaign.sh token json
#   NO_BUILD=1 Fuzz/campaign.sh config      use the binaries in Fuzz/out as they are (no rebuild)
# Prints one line per target as it ends and writes the table to Fuzz/out/campaign-DATE.md (CAMPAIGN_TABLE overrides):
# target | executions | seconds | executions/s | edges covered | corpus inputs.
# Every run's whole libFuzzer log stays in Fuzz/out/campaign-logs/TARGET.log.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10000000}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cd Fuzz/Targets && ls *.swift | sed 's/\.swift$//')
[ -n "${NO_BUILD:-}" ] || Fuzz/build.sh "${targets[@]}" >/dev/null || { echo "campaign: FAIL: build" >&2; exit 1; }
source Fuzz/options.sh
mkdir -p Fuzz/out/campaign-logs
table=${CAMPAIGN_TABLE:-Fuzz/out/campaign-$(date -u +%Y%m%d-%H%M%S)-$$.md}
{
  if [ -n "${NO_BUILD:-}" ]; then built="binaries as they were (NO_BUILD), tree at commit"; else built="built at commit"; fi
  echo "Campaign of $(date -u +%Y-%m-%dT%H:%MZ), $built $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $RUNS executions per target"
  echo
  echo "| target | executions | seconds | executions/s | edges | corpus |"
  echo "|---|---:|---:|---:|---:|---:|"
} >"$table"
for t in "${targets[@]}"; do
  [ -x "Fuzz/out/$t" ] || { echo "campaign: FAIL: no binary Fuzz/out/$t" >&2; exit 1; }
  mkdir -p "Fuzz/out/corpus/$t" "Fuzz/out/artifacts/$t"
  log=Fuzz/out/campaign-logs/$t.log
  start=$(date +%s)
  "Fuzz/out/$t" -runs="$RUNS" "${FUZZ_FLAGS[@]}" -max_len="$(max_len "$t")" $(dict_flag "$t") \
    -artifact_prefix="Fuzz/out/artifacts/$t/" -print_final_stats=1 "Fuzz/out/corpus/$t" "Fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  seconds=$(( $(date +%s) - start ))
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  edges=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo '?')
  corpus=$(find "Fuzz/out/corpus/$t" -type f | wc -l)
  line="| \`$t\` | ${runs:-0} | $seconds | $(( ${runs:-0} / (seconds > 0 ? seconds : 1) )) | $edges | $corpus |"
  echo "$line" >>"$table"
  echo "$line"
  if [ $rc -ne 0 ]; then
    echo "campaign: FAIL: $t exit $rc (log $log; input in Fuzz/out/artifacts/$t/)" >&2
    grep -E 'ERROR|SUMMARY|Fatal error|Test unit written' "$log" | head -10 >&2
    exit 1
  fi
done
echo "campaign: PASS (${#targets[@]} targets, table in $table)"
