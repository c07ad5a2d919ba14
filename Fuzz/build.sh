#!/usr/bin/env bash
# Builds the libFuzzer targets in Fuzz/Targets/ into Fuzz/out/<target>: the library products (HTTPWire,
# AppCheck, AppAttest, GatewayConfig: the Gateway target and what it depends on) compiled by SwiftPM with coverage and AddressSanitizer into
# .build/fuzz, then each target linked against their objects with `swiftc -sanitize=fuzzer,address` (libFuzzer
# ships with Swift on Linux). Usage: Fuzz/build.sh [TARGET…] (default: all). Incremental: a second run only
# recompiles what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
SWIFTC=${SWIFTC:-swiftc}
BP=.build/fuzz
OUT=Fuzz/out
mkdir -p "$OUT"

# Coverage instrumentation for Swift and C (our C shims; the system libraries are not instrumented); -O as the
# release build is.
"$SWIFT" build -c release --build-path "$BP" --target Gateway \
  -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address >"$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; echo "Fuzz/build.sh: swift build failed" >&2; exit 1; }
BIN=$("$SWIFT" build -c release --build-path "$BP" --show-bin-path)

# The objects of the library modules built here (not tests, executables or plugin tools), by module, and the
# module maps of C modules (system libraries, C targets) so the Swift modules that import them load.
declare -A module_objects=()
for dir in "$BIN"/*.build; do
  case $dir in *-tool.build|*Tests.build|*/TestSupport.build) continue ;; esac
  mapfile -t o < <(find "$dir" -name '*.o' | sort)
  # A source moved or deleted since the last build leaves its object behind: keep our modules' objects only
  # when their source still exists (dependencies' objects are kept as they are).
  module=$(basename "$dir" .build)
  if [ -d "Sources/$module" ]; then
    kept=()
    for obj in "${o[@]}"; do
      src=$(basename "$obj" .o)
      [ -n "$(find "Sources/$module" -name "$src" -print -quit)" ] && kept+=("$obj")
    done
    o=("${kept[@]}")
  fi
  [ ${#o[@]} -gt 0 ] || continue
  # An executable's main would clash with libFuzzer's.
  nm --defined-only "${o[@]}" 2>/dev/null | grep -qE ' T (main|_main)$' && continue
  module_objects[$module]="${o[*]}"
done
# What each target links: the modules it imports and their dependencies (Fuzz/modules.py), so that libFuzzer's
# coverage map holds only code the target can reach.
# (Written aside and renamed: a second build.sh running at the same time never reads half a file.)
"$SWIFT" package describe --type json >"$BP/describe.json.$$" 2>/dev/null && mv "$BP/describe.json.$$" "$BP/describe.json" \
  || { rm -f "$BP/describe.json.$$"; echo "Fuzz/build.sh: swift package describe failed" >&2; exit 1; }
flags=(-I "$BIN/Modules")
while IFS= read -r m; do
  grep -q -- '-Swift.h' "$m" || flags+=(-Xcc "-fmodule-map-file=$m")
done < <(find "$BIN" Sources "$BP/checkouts" -name module.modulemap -not -path '*-tool.build/*' 2>/dev/null | sort -u)
for d in Sources/*/include "$BP"/checkouts/*/Sources/*/include; do
  [ -d "$d" ] && flags+=(-Xcc "-I$d")
done

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(cd Fuzz/Targets && ls *.swift | sed 's/\.swift$//'))
for t in "${targets[@]}"; do
  src=Fuzz/Targets/$t.swift
  [ -f "$src" ] || { echo "Fuzz/build.sh: no target $t (Fuzz/Targets/$t.swift)" >&2; exit 1; }
  objects=()
  for module in $(python3 Fuzz/modules.py "$src" <"$BP/describe.json"); do
    [ -n "${module_objects[$module]:-}" ] && objects+=(${module_objects[$module]})
  done
  [ ${#objects[@]} -gt 0 ] || { echo "Fuzz/build.sh: $t imports no module built here" >&2; exit 1; }
  # Relink only when the target source or any library object is newer than the binary.
  if [ -x "$OUT/$t" ] && [ -z "$(find "$src" "${objects[@]}" -newer "$OUT/$t" -print -quit)" ]; then continue; fi
  "$SWIFTC" -sanitize=fuzzer,address -O -parse-as-library -module-name "fuzz_${t//-/_}" "$src" "${flags[@]}" \
    "${objects[@]}" -lssl -lcrypto -lnghttp2 -lsqlite3 -lyaml -o "$OUT/$t" 2>"$OUT/$t.link.log" \
    || { grep -v "Cannot export local symbol" "$OUT/$t.link.log" | tail -30; echo "Fuzz/build.sh: $t failed" >&2; exit 1; }
  echo "built $OUT/$t"
done
