#!/usr/bin/env bash
# A long fuzzing run by hand: Fuzz/run.sh TARGET [SECONDS] [libFuzzer flags…]   (default 600 s, one core)
#   Fuzz/run.sh http-request-head 3600
#   Fuzz/run.sh token 0 -jobs=2 -workers=2          (0 = until stopped)
# Builds the target when needed; grows its corpus in Fuzz/out/corpus/TARGET (seeded from Fuzz/corpus/TARGET,
# which stays untouched: copy new finds there by hand when they add coverage, keeping it small); a crash,
# leak or timeout leaves its input in Fuzz/out/artifacts/TARGET/ and exits non-zero. Replay one with
# `Fuzz/out/TARGET FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n 2,8p "$0" >&2; echo "targets: $(cd Fuzz/Targets && ls *.swift | sed 's/\.swift$//' | tr '\n' ' ')" >&2; exit 2; }
t=$1; seconds=${2:-600}; shift; [ $# -gt 0 ] && shift
Fuzz/build.sh "$t" >/dev/null
mkdir -p "Fuzz/out/corpus/$t" "Fuzz/out/artifacts/$t"
source Fuzz/options.sh
exec "Fuzz/out/$t" -max_total_time="$seconds" "${FUZZ_FLAGS[@]}" -max_len="$(max_len "$t")" $(dict_flag "$t") \
  -artifact_prefix="Fuzz/out/artifacts/$t/" -print_final_stats=1 "$@" "Fuzz/out/corpus/$t" "Fuzz/corpus/$t"
