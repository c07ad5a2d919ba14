#!/usr/bin/env bash
# The mobile DPoP examples' portable parts, compiled as written and run against a real `appcheck-gateway serve` with
# an issuer (docs/examples/ios/dpop/README.md and docs/examples/android/README.md say exactly what is and is not
# checked):
# - iOS: docs/examples/ios/dpop/GatewayDPoP.swift (Foundation only) compiled by this machine's swiftc (Swift 6 mode)
#   with Tests/examples/ios-dpop/ (a key made by the `openssl` command behind the example's DPoPKey seam; the
#   Secure Enclave file needs CryptoKit and is NOT compiled here), and run: exchangeHook, data(for:token:), htu.
# - Android: docs/examples/android/DPoPProofs.kt compiled by Debian's kotlinc 1.3 with org.json (Debian's
#   libandroid-json-java) and Tests/examples/android-dpop/Check.kt, run on the JVM with a software key (the
#   Keystore and OkHttp file, GatewayDPoP.kt, is NOT compiled here: no Android SDK or OkHttp 4).
# Each ends with `ios-dpop: PASS` / `android-dpop: PASS`; the script exits non-zero on any failure.
#
# Environment: APPCHECK_GATEWAY_BIN (default .build/debug/appcheck-gateway), SWIFTC (default swiftc).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${APPCHECK_GATEWAY_BIN:-$root/.build/debug/appcheck-gateway}"
swiftc="${SWIFTC:-swiftc}"
number="123456789012"
app="1:$number:ios:0a1b2c3d4e5f6a7b"
android_app="1:$number:android:0a1b2c3d4e5f6a7c"
secret="debug-secret-0123456789abcdef"

[ -x "$bin" ] || { echo "mobile-dpop: $bin not found; run 'swift build' first" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/appcheck-mobile-dpop.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Compile first (the slow part), so the gateway is not kept waiting.
echo "mobile-dpop: swiftc docs/examples/ios/dpop/GatewayDPoP.swift + Tests/examples/ios-dpop"
"$swiftc" -swift-version 6 -o "$work/ios-check" "$root/docs/examples/ios/dpop/GatewayDPoP.swift" \
  "$here/ios-dpop/OpenSSLCLIKey.swift" "$here/ios-dpop/main.swift" </dev/null
echo "mobile-dpop: kotlinc docs/examples/android/DPoPProofs.kt + Tests/examples/android-dpop/Check.kt"
json_jar=/usr/share/java/com.android.json.jar
kotlinc -nowarn -cp "$json_jar" -d "$work/android-check.jar" "$root/docs/examples/android/DPoPProofs.kt" \
  "$here/android-dpop/Check.kt" </dev/null 2> >(grep -v -e 'Xverify:none' -e '^$' >&2)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
mkdir -p "$work/www/strict"
echo ok >"$work/www/strict/items"
upstream_port="$(free_port)"
python3 -m http.server "$upstream_port" --bind 127.0.0.1 --directory "$work/www" >"$work/upstream.log" 2>&1 </dev/null &
pids+=($!)

"$bin" keygen --key "$work/issuer.pem" --jwks "$work/issuer-jwks.json" >/dev/null </dev/null
port="$(free_port)"
cat >"$work/gateway.yaml" <<YAML
server:
  listen: ["127.0.0.1:$port"]
app_check:
  project_number: "$number"
  jwks: { url: none }
upstreams:
  www: { url: "http://127.0.0.1:$upstream_port" }
routes:
  - { name: strict, prefix: /strict/, upstream: www, enforcement: enforce, dpop: required }
issuer:
  issuer_url: http://127.0.0.1:$port/appcheck
  signing_keys: [$work/issuer.pem]
  apps:
    - app_id: "$app"
      debug_secrets: ["$secret"]
      require_dpop: true
    - app_id: "$android_app"
      debug_secrets: ["$secret"]
      require_dpop: true
YAML
"$bin" serve --config "$work/gateway.yaml" >"$work/gateway.log" 2>&1 </dev/null &
pids+=($!)
for _ in $(seq 1 100); do
  curl -sf "http://127.0.0.1:$port/appcheck/v1/jwks" >/dev/null 2>&1 && break
  kill -0 "${pids[1]}" 2>/dev/null || { cat "$work/gateway.log" >&2; echo "mobile-dpop: the gateway exited" >&2; exit 1; }
  sleep 0.1
done
# The replay store's state begins at start: proofs made in its first second would count as made before it.
sleep 1.1

base="http://127.0.0.1:$port"
status=0
"$work/ios-check" "$base" "$base/appcheck/v1/projects/$number/apps/$app:exchangeDebugToken" "$secret" "$work/ios-keys" \
  </dev/null || status=1
java -cp "$work/android-check.jar:/usr/share/java/kotlin-stdlib.jar:$json_jar" com.example.appcheckgateway.check.CheckKt \
  "$base" "$base/appcheck/v1/projects/$number/apps/$android_app:exchangeDebugToken" "$secret" </dev/null || status=1
[ "$status" -eq 0 ] || { tail -5 "$work/gateway.log" >&2; echo "mobile-dpop: FAIL"; exit 1; }
echo "mobile-dpop: PASS"
